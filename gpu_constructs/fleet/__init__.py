"""GPU fleets: launch templates, Auto Scaling groups mixing Spot with reserved capacity, the fleet metrics
their scaling uses, the node scripts' publication and the AMI rollout. What a node receives at boot is rendered
by ``fleet.render``; what runs on it is ``scripts/node/``."""
