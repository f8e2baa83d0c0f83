"""The network: the platform VPC and its subnets, VPC endpoints (and which node call uses each), the GPU node,
EFA and training security groups."""
