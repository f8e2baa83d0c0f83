"""Identity, keys and audit: customer-managed KMS keys, CloudTrail, the GPU node role, the permissions boundary
every role carries, Session Manager logging. IAM action lists shared by several policies: ``security.render``."""
