"""The GitOps pipeline: its synth and post-deploy check steps, its artifact bucket, and the acknowledgments of
the grants CDK Pipelines generates."""
