"""Data at rest: S3 buckets hardened the same way everywhere (and their access-log bucket), FSx for Lustre
linked to the data bucket."""
