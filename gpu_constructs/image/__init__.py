"""The golden AMI: its SSM parameter, Image Builder components (from ``scripts/image/components``), recipe,
build role, infrastructure, build logs, distribution to other accounts, the key of its snapshots, and the
pipeline that refreshes it."""
