"""PlatformFleet: each fleet's backend, service and outputs from one place, and the handle the stacks keep."""

from __future__ import annotations

import pytest
from aws_cdk import Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_pcs as pcs

from config.naming import ResourceNames
from gpu_constructs.fleet.gpu_fleet import GpuFleet
from gpu_constructs.platform_fleet.platform_fleet import PlatformFleet, output_id
from gpu_constructs.scheduler.slurm_fleet import SlurmFleet
from stacks.platform_stage import PlatformStage


def test_each_fleet_has_one_handle_in_the_order_of_the_configuration(stage: PlatformStage) -> None:
    env = stage.fleets.site.env
    assert list(stage.fleets.fleets) == [f.name for f in env.fleets]


def test_an_auto_scaling_fleet_is_a_group_at_the_stack_level_with_its_name_and_templates(stage: PlatformStage) -> None:
    names = ResourceNames.of(stage.fleets.site.env)
    asg = [f for f in stage.fleets.site.env.fleets if f.scheduler.value == "none"]
    assert asg, "the Slurm test environment keeps an Auto Scaling fleet beside its Slurm fleets"
    for fleet in asg:
        handle = stage.fleets.fleets[fleet.name]
        backend = stage.fleets.node.find_child(f"Fleet-{fleet.name}")
        assert isinstance(backend, GpuFleet)
        assert handle.group_name == names.asg_name(fleet.name) and handle.queue_id is None
        assert len(handle.launch_template_ids) == len(backend.launch_templates) >= 1
        group = backend.auto_scaling_group.node.default_child
        assert isinstance(group, autoscaling.CfnAutoScalingGroup)
        assert Stack.of(stage.fleets).resolve(group.auto_scaling_group_name) == names.asg_name(fleet.name)
        assert (handle.service is not None) == (fleet.service is not None)
        assert stage.fleets.services.get(fleet.name) is handle.service


def test_a_slurm_fleet_is_node_groups_and_a_queue_under_the_scheduler_and_no_group(stage: PlatformStage) -> None:
    scheduler = stage.fleets.scheduler
    assert scheduler is not None
    slurm = [f for f in stage.fleets.site.env.fleets if f.scheduler.value == "slurm"]
    for fleet in slurm:
        handle = stage.fleets.fleets[fleet.name]
        backend = scheduler.node.find_child(f"Fleet-{fleet.name}")
        assert isinstance(backend, SlurmFleet)
        assert handle.group_name is None and handle.service is None
        assert handle.queue_id == backend.queue.attr_id
        assert isinstance(backend.queue, pcs.CfnQueue)
        assert len(handle.launch_template_ids) == len(backend.launch_templates)
        assert stage.fleets.node.try_find_child(f"Fleet-{fleet.name}") is None  # not at the stack level too


def test_the_outputs_are_the_stacks_own_named_after_the_fleet(stage: PlatformStage) -> None:
    outputs = {c.node.id for c in stage.fleets.node.children if c.node.id.startswith(("GroupName", "Service", "Slurm"))}
    for fleet in stage.fleets.site.env.fleets:
        suffix = output_id(fleet)
        if fleet.scheduler.value == "slurm":
            assert f"SlurmQueue{suffix}" in outputs and f"GroupName{suffix}" not in outputs
        else:
            assert f"GroupName{suffix}" in outputs
            assert (f"ServiceUrl{suffix}" in outputs) == (fleet.service is not None)


def test_output_ids_keep_letters_and_digits_in_title_case() -> None:
    class _Named:
        name = "llm-serve_2"

    assert output_id(_Named()) == "LlmServe2"  # type: ignore[arg-type]


def test_a_slurm_fleet_without_a_cluster_is_refused(stage: PlatformStage) -> None:
    fleet = next(f for f in stage.fleets.site.env.fleets if f.scheduler.value == "slurm")
    with pytest.raises(ValueError, match=f"fleet {fleet.name} sets scheduler: slurm but the environment has no PCS"):
        PlatformFleet(Stack(), fleet, site=stage.fleets.site, cluster=None)
