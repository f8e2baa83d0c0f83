"""Pure renderers of the security concern: IAM action lists and statements more than one policy grants or caps."""
