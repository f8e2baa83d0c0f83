"""What every concern uses to stay within the platform's rules: acknowledging a rule-pack finding on one
construct with its reason (``acknowledge``), and AWS SDK calls made by custom resources with an encrypted,
retained log group and scoped permissions (``sdk_call_resource``), and the CloudFormation resource under an
aws-cdk-lib construct with its class checked (``cfn_child``)."""
