"""Training jobs on a node: the job runner the platform's job document calls (``python3 -m jobs.runner``).

See scripts/node/README.md, "Training jobs".
"""
