"""One fleet's whole story (``PlatformFleet``): its nodes' user data, its capacity (an Auto Scaling group from
``gpu_constructs.fleet`` or PCS node groups behind a Slurm queue from ``gpu_constructs.scheduler``), its service's
load balancer and its outputs, built on what every fleet of the environment shares (``site``). The stacks get a
small typed handle of each fleet."""
