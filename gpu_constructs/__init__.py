"""Constructs of the GPU platform, one package per concern; stacks (``stacks/``) compose them.

- ``compliance``: acknowledging a rule-pack finding with its reason; SDK calls made by custom resources
  under the platform's rules; an L2 construct's L1 resource, typed (every concern uses them).
- ``network``: the VPC, its endpoints and the security groups of nodes and the EFA fabric.
- ``security``: KMS keys, the audit trail, the node role, the permissions boundary, Session Manager.
- ``storage``: hardened S3 buckets and FSx for Lustre.
- ``fleet``: GPU fleets (launch templates, Auto Scaling groups, the AMI rollout) and what a node is handed
  at boot: node scripts, user data, node settings, CloudWatch agent config (``fleet.render``).
- ``observability``: the alerts topic, alarms, Spot events and the dashboard.
- ``image``: the golden AMI: its parameter, Image Builder components, recipe, roles, distribution, pipeline.
- ``pipeline``: the GitOps pipeline's steps, artifact bucket and acknowledgments.

A construct receives typed keyword-only arguments and reads no environment variable or context.
A ``render`` subpackage holds pure renderers of its concern: functions and tables that build
configuration text or IAM action lists from typed inputs and create no construct.
"""
