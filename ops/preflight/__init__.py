"""``gpu-platform preflight``: will a deploy of this environment succeed in this account?

One module per group of checks; each check takes the environment's config and an ``Aws``
(``ops.preflight.aws``) and returns findings. ``command.preflight_command`` runs them.
"""
