"""Pure renderers of what a GPU node receives at boot: user data, node settings (``node.env``), the CloudWatch
agent configuration and the metric names it publishes, and the node log files the agent ships."""
