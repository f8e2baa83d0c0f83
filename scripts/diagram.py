#!/usr/bin/env python3
"""Draw one environment's architecture from its synthesized cloud assembly into an SVG file.

What it reads: ``<assembly>/assembly-<env>/manifest.json`` (the stacks and their deploy-order
dependencies) and each stack's template (its main resources, counted by type, and its cross-stack
references: every ``Fn::GetStackOutput`` / ``Fn::ImportValue`` of another stack's output, followed to
the resource that output publishes). Stacks are drawn in layers, a stack below the stacks it uses;
a solid arrow is a reference, a dashed one a deploy-order dependency without a reference;
each arrow's number leads to its line in the legend (what the reference carries). The picture depends only on
the assembly: same assembly, same bytes. ``main`` adds a comment with the digest of ``config/*.yaml`` (the config
``make diagram`` synthesized it from), so a test can tell the shipped config's picture from a user's config.

Usage: ``make diagram`` (synthesizes first), or ``scripts/diagram.py [--assembly cdk.out] [--env dev]
[--out docs/architecture.svg]``. Exit codes: 0 written, 2 no such assembly or environment.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "config"
_DRAWN_FROM = re.compile(r"^<!-- drawn from config/\*\.yaml sha256:([0-9a-f]{64}) -->$", re.M)


def escape(text: str) -> str:
    """``text`` as SVG character data: ``&``, ``<`` and ``>`` escaped, quotes left as they are."""
    return html.escape(text, quote=False)


#: The resource types drawn in a stack's box, in this order, with their label; the rest (policies,
#: routes, associations, aliases) is plumbing and left out.
MAIN_RESOURCES: dict[str, str] = {
    "AWS::EC2::VPC": "VPC",
    "AWS::EC2::Subnet": "subnet",
    "AWS::EC2::NatGateway": "NAT gateway",
    "AWS::EC2::VPCEndpoint": "VPC endpoint",
    "AWS::EC2::FlowLog": "flow log",
    "AWS::EC2::SecurityGroup": "security group",
    "AWS::KMS::Key": "KMS key",
    "AWS::CloudTrail::Trail": "CloudTrail trail",
    "AWS::S3::Bucket": "S3 bucket",
    "AWS::SNS::Topic": "SNS topic",
    "AWS::Logs::LogGroup": "log group",
    "AWS::IAM::Role": "IAM role",
    "AWS::IAM::ManagedPolicy": "managed policy",
    "AWS::IAM::InstanceProfile": "instance profile",
    "AWS::FSx::FileSystem": "FSx for Lustre",
    "AWS::FSx::DataRepositoryAssociation": "data repository association",
    "AWS::SSM::Parameter": "SSM parameter",
    "AWS::SSM::Document": "SSM document",
    "AWS::EC2::LaunchTemplate": "launch template",
    "AWS::AutoScaling::AutoScalingGroup": "Auto Scaling group",
    "AWS::AutoScaling::ScalingPolicy": "scaling policy",
    "AWS::ElasticLoadBalancingV2::LoadBalancer": "load balancer",
    "AWS::ElasticLoadBalancingV2::Listener": "listener",
    "AWS::ElasticLoadBalancingV2::TargetGroup": "target group",
    "AWS::AutoScaling::ScheduledAction": "scheduled action",
    "AWS::Events::Rule": "EventBridge rule",
    "AWS::CloudWatch::Alarm": "alarm",
    "AWS::CloudWatch::CompositeAlarm": "composite alarm",
    "AWS::CloudWatch::Dashboard": "dashboard",
    "AWS::Logs::MetricFilter": "metric filter",
    "AWS::ImageBuilder::ImagePipeline": "Image Builder pipeline",
    "AWS::ImageBuilder::ImageRecipe": "image recipe",
    "AWS::ImageBuilder::Component": "Image Builder component",
    "AWS::ImageBuilder::DistributionConfiguration": "distribution",
    "AWS::Lambda::Function": "Lambda function",
}

BOX_W, LINE_H, PAD, COL_GAP, ROW_GAP, TOP = 290, 16, 10, 40, 90, 60


class DiagramError(Exception):
    """The assembly cannot be drawn; its text is the one line printed."""


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def load(assembly: Path, env: str) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]]]:
    """Stack name -> template, and stack name -> the stacks it must deploy after (manifest dependencies)."""
    folder = assembly / f"assembly-{env}"
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        raise DiagramError(f"{manifest_path}: not found; fix: run make synth ENV={env} (or pass --assembly)")
    artifacts = json.loads(manifest_path.read_text())["artifacts"]
    stacks = {k: a for k, a in artifacts.items() if a["type"] == "aws:cloudformation:stack"}
    by_id = {k: a["properties"]["stackName"] for k, a in stacks.items()}
    templates = {
        by_id[k]: json.loads((folder / a["properties"]["templateFile"]).read_text()) for k, a in stacks.items()
    }
    depends = {by_id[k]: {by_id[d] for d in a.get("dependencies", []) if d in by_id} for k, a in stacks.items()}
    return templates, depends


def references(templates: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(consumer, producer) -> the labels of the producer's resources the consumer reads, sorted, unique."""
    exports = {}
    for stack, template in templates.items():
        for name, output in template.get("Outputs", {}).items():
            value = output["Value"]
            logical = value.get("Ref") or (value.get("Fn::GetAtt") or [None])[0] if isinstance(value, dict) else None
            kind = template["Resources"].get(logical, {}).get("Type", "") if logical else ""
            label = MAIN_RESOURCES.get(kind, kind.split("::")[-1] if kind else name)
            exports[(stack, name)] = label
            if "Export" in output and isinstance(output["Export"].get("Name"), str):
                exports[(stack, "export:" + output["Export"]["Name"])] = label
    found: dict[tuple[str, str], set[str]] = {}
    for consumer, template in templates.items():
        for node in _walk(template.get("Resources", {})):
            if "Fn::GetStackOutput" in node:
                ref = node["Fn::GetStackOutput"]
                key = (ref["StackName"], ref["OutputName"])
            elif isinstance(node.get("Fn::ImportValue"), str):
                key = next(((s, n) for s, n in exports if n == "export:" + node["Fn::ImportValue"]), ("?", "?"))
            else:
                continue
            if key[0] in templates and key[0] != consumer:
                found.setdefault((consumer, key[0]), set()).add(exports.get(key, key[1]))
    return {pair: sorted(labels) for pair, labels in sorted(found.items())}


def main_resources(template: dict[str, Any]) -> list[str]:
    counts: dict[str, int] = {}
    for resource in template.get("Resources", {}).values():
        if resource["Type"] in MAIN_RESOURCES:
            counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    return [f"{counts[t]} x {label}" for t, label in MAIN_RESOURCES.items() if t in counts]


def layers(stacks: Sequence[str], uses: dict[str, set[str]]) -> list[list[str]]:
    """Each stack one layer below the deepest stack it uses (deploys after)."""
    depth: dict[str, int] = {}

    def level(stack: str, seen: frozenset[str] = frozenset()) -> int:
        if stack not in depth:
            below = [level(u, seen | {stack}) for u in uses.get(stack, ()) if u not in seen]
            depth[stack] = 1 + max(below, default=-1)
        return depth[stack]

    for stack in stacks:
        level(stack)
    return [sorted(s for s in stacks if depth[s] == n) for n in range(max(depth.values(), default=-1) + 1)]


def render(assembly: Path, env: str) -> str:
    templates, depends = load(assembly, env)
    refs = references(templates)
    uses = {s: set(depends.get(s, set())) | {p for c, p in refs if c == s} for s in templates}
    rows = layers(sorted(templates), uses)
    boxes: dict[str, tuple[int, int, int]] = {}  # stack -> x, y, height
    width = max(len(r) for r in rows) * (BOX_W + COL_GAP) + COL_GAP
    y = TOP
    body: list[str] = []
    for row in rows:
        heights = {s: (len(main_resources(templates[s])) + 1) * LINE_H + 2 * PAD for s in row}
        offset = (width - len(row) * (BOX_W + COL_GAP) + COL_GAP) // 2
        for n, stack in enumerate(row):
            x = offset + n * (BOX_W + COL_GAP)
            boxes[stack] = (x, y, heights[stack])
        y += max(heights.values()) + ROW_GAP
    edges = [(c, p, ", ".join(labels), False) for (c, p), labels in refs.items()]
    edges += [(c, p, "deploy order", True) for c in sorted(depends) for p in sorted(depends[c]) if (c, p) not in refs]
    # Each box's arrows leave from (and arrive at) points spread along its edge, ordered by the other end's x.
    out_of = {s: sorted((e for e in edges if e[0] == s), key=lambda e: boxes[e[1]][0]) for s in boxes}
    into = {s: sorted((e for e in edges if e[1] == s), key=lambda e: boxes[e[0]][0]) for s in boxes}
    legend = []
    for number, edge in enumerate(edges, start=1):
        consumer, producer, label, dashed = edge
        start = _spread(boxes[consumer], out_of[consumer].index(edge), len(out_of[consumer]), top=True)
        end = _spread(boxes[producer], into[producer].index(edge), len(into[producer]), top=False)
        body += _arrow(start, end, number, dashed=dashed)
        legend.append(f"{number}. {consumer} uses {producer}: {label}")
    for stack, (x, yy, h) in sorted(boxes.items()):
        body.append(f'<rect x="{x}" y="{yy}" width="{BOX_W}" height="{h}" rx="6" class="stack"/>')
        body.append(f'<text x="{x + PAD}" y="{yy + PAD + 12}" class="name">{escape(stack)}</text>')
        for n, line in enumerate(main_resources(templates[stack]), start=1):
            body.append(f'<text x="{x + PAD}" y="{yy + PAD + 12 + n * LINE_H}">{escape(line)}</text>')
    for n, line in enumerate(legend):
        body.append(f'<text x="{COL_GAP}" y="{y + n * LINE_H}" class="legend">{escape(line)}</text>')
    y += len(legend) * LINE_H + PAD
    title = f"GPU platform {env}: stacks, main resources and cross-stack references (scripts/diagram.py)"
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}">',
            "<style>text{font:12px sans-serif;fill:#222}.name{font-weight:bold;font-size:13px}"
            ".stack{fill:#f3f6fb;stroke:#3b6ea5}.ref{stroke:#555;fill:none}.order{stroke:#999;stroke-dasharray:5 4;fill:none}"
            ".label{font-size:10px;fill:#222}.num{fill:#fff;stroke:#555}.legend{font-size:11px}</style>",
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7"'
            ' orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>',
            f'<text x="{COL_GAP}" y="30" class="name">{escape(title)}</text>',
            *body,
            "</svg>",
            "",
        ]
    )


def config_digest(config_dir: Path = CONFIG_DIR) -> str:
    """sha256 over the names and bytes of ``config_dir``'s environment files, in name order."""
    digest = hashlib.sha256()
    for path in sorted(config_dir.glob("*.yaml")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def stamp(svg: str, digest: str) -> str:
    """``svg`` with the config digest as a comment after its first line."""
    first, rest = svg.split("\n", 1)
    return f"{first}\n<!-- drawn from config/*.yaml sha256:{digest} -->\n{rest}"


def drawn_from(svg: str) -> str | None:
    """The config digest ``stamp`` put into ``svg``; None if it has none."""
    found = _DRAWN_FROM.search(svg)
    return found.group(1) if found else None


def _spread(box: tuple[int, int, int], n: int, count: int, *, top: bool) -> tuple[int, int]:
    x, y, h = box
    return x + BOX_W * (n + 1) // (count + 1), y if top else y + h


def _arrow(start: tuple[int, int], end: tuple[int, int], number: int, *, dashed: bool) -> list[str]:
    """From the consumer's top edge to the producer's bottom edge, numbered just above the consumer (in the
    gap between rows, where no box is), the number explained in the legend."""
    (x1, y1), (x2, y2) = start, end
    css = "order" if dashed else "ref"
    nx = x1 + (x2 - x1) * 22 // max(y1 - y2, 1)
    return [
        f'<path d="M{x1},{y1}L{x2},{y2}" class="{css}" marker-end="url(#arrow)"/>',
        f'<circle cx="{nx}" cy="{y1 - 22}" r="8" class="num"/>',
        f'<text x="{nx}" y="{y1 - 18}" class="label" text-anchor="middle">{number}</text>',
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--assembly", type=Path, default=ROOT / "cdk.out", help="cloud assembly folder (cdk.out)")
    parser.add_argument("--env", default="dev", help="environment to draw (default: dev)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "architecture.svg", help="SVG file to write")
    args = parser.parse_args(argv)
    try:
        svg = stamp(render(args.assembly, args.env), config_digest())
    except DiagramError as err:
        print(err, file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(svg, encoding="utf-8")
    stacks = svg.count('class="stack"')
    print(f"{args.out}: {args.env}, {stacks} stacks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
