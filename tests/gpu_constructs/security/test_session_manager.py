"""SessionManagerLogging: every shell session streams, encrypted, to its log group."""

from __future__ import annotations

from gpu_constructs.security.session_manager import SessionManagerLogging
from tests.gpu_constructs.helpers import DESTROY, RETENTION, bare_stack, key, only, template


def test_sessions_stream_encrypted_to_the_named_group() -> None:
    stack = bare_stack()
    SessionManagerLogging(
        stack,
        "Sessions",
        document_name="gpu-platform-dev-session",
        log_group_name="/gpu-platform/dev/ssm-sessions",
        key=key(stack),
        log_retention=RETENTION,
        removal_policy=DESTROY,
    )
    tmpl = template(stack)
    group_id, group = only(tmpl, "AWS::Logs::LogGroup")
    assert group["Properties"]["LogGroupName"] == "/gpu-platform/dev/ssm-sessions"
    assert group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0].startswith("Key")
    _, doc = only(tmpl, "AWS::SSM::Document")
    assert doc["Properties"]["DocumentType"] == "Session" and doc["Properties"]["Name"] == "gpu-platform-dev-session"
    inputs = doc["Properties"]["Content"]["inputs"]
    assert inputs["cloudWatchLogGroupName"] == {"Ref": group_id}
    assert inputs["cloudWatchEncryptionEnabled"] is True and inputs["cloudWatchStreamingEnabled"] is True
    assert inputs["kmsKeyId"]["Ref"].startswith("Key")  # the data channel too
    assert inputs["runAsEnabled"] is False


def test_run_as_is_on_where_asked() -> None:
    """A Slurm environment's sessions open as the caller's SSMSessionRunAs user, never as ssm-user."""
    stack = bare_stack()
    SessionManagerLogging(stack, "S", document_name="d", log_group_name="/g", key=key(stack), log_retention=RETENTION,
                          removal_policy=DESTROY, run_as=True)  # fmt: skip
    _, doc = only(template(stack), "AWS::SSM::Document")
    inputs = doc["Properties"]["Content"]["inputs"]
    assert inputs["runAsEnabled"] is True and "runAsDefaultUser" not in inputs  # no shared fallback user
