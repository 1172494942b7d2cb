"""Every image a manifest or compose file names is either built from this repository or pulled from a
public registry, and the three lists agree: the images named in deploy/ and the compose files, the
Dockerfiles, and the docs' build lines. An image named nowhere in the docs' build steps ends, on a
cluster, in ImagePullBackOff (as the router's did before this test)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.unit.deploy.test_kubernetes import documents

KUSTOMIZE = REPO / "deploy" / "kubernetes"
OVERLAYS = (KUSTOMIZE, KUSTOMIZE / "base", KUSTOMIZE / "fleet")
COMPOSE = (REPO / "docker-compose.yml", REPO / "docker-compose.fleet.yml")
PAGES = (REPO / "docs" / "guides" / "kubernetes.md", REPO / "docs" / "guides" / "fleet.md",
         REPO / "docs" / "guides" / "compose.md")
# `docker build -f PATH -t [REGISTRY/]NAME:TAG`, in a Dockerfile's header or a page's build step.
BUILD = re.compile(r"docker build -f (\S+) -t (?:REGISTRY/)?([a-z0-9-]+)(?::([\w.-]+))?")
PULLED = re.compile(r"^([a-z0-9.-]+\.[a-z]+/)?[a-z0-9-]+/[a-z0-9./-]+")  # a registry's or a hub user's image


def dockerfiles() -> dict[str, Path]:
    """Each image this repository builds, by name: the Dockerfile whose header says how."""
    built = {}
    for path in REPO.glob("**/Dockerfile"):
        if ".venv" in path.parts or "node_modules" in path.parts:
            continue
        found = BUILD.search(path.read_text())
        assert found, f"{path.relative_to(REPO)}: its header says no `docker build -f ... -t NAME`"
        assert REPO / found[1] == path, f"{path.relative_to(REPO)} says it is built from {found[1]}"
        built[found[2]] = path
    return built


def manifest_images() -> dict[str, str]:
    """Each image the manifests name, with the tag their kustomizations pin (None: unpinned there)."""
    named = {}
    for overlay in OVERLAYS:
        for _, doc in documents(overlay):
            pod = doc.get("spec", {}).get("template", {}).get("spec", {})
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                named.setdefault(container["image"], None)
    for kustomization in KUSTOMIZE.rglob("kustomization.yaml"):
        for image in yaml.safe_load(kustomization.read_text()).get("images", []):
            if image["name"] in named:
                tag = str(image.get("newTag", ""))
                assert named[image["name"]] in (None, tag), f"{image['name']} pinned to two tags"
                named[image["name"]] = tag
    return named


class ComposeLoader(yaml.SafeLoader):
    """Compose's merge tags (`!reset`, `!override`) read as the value they tag."""


ComposeLoader.add_multi_constructor("!", lambda loader, _tag, node: (
    loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode) else
    loader.construct_mapping(node) if isinstance(node, yaml.MappingNode) else loader.construct_scalar(node)))


def compose_images() -> dict[str, str | None]:
    """Each image the compose files name, with the Dockerfile that builds it (None: pulled)."""
    named: dict[str, str | None] = {}
    for path in COMPOSE:
        services = yaml.load(path.read_text(), Loader=ComposeLoader)["services"]
        for service in services.values():
            if "image" in service:
                name = service["image"].split(":")[0]
                build = service.get("build")
                named[name] = build["dockerfile"] if build else named.get(name)
    return named


def documented() -> dict[str, tuple[str, str | None]]:
    """Each build line of the docs: image -> (its Dockerfile, its tag)."""
    return {name: (dockerfile, tag) for page in PAGES for dockerfile, name, tag in BUILD.findall(page.read_text())}


def test_every_image_named_is_built_here_or_pulled_from_a_registry():
    built = dockerfiles()
    for name, source in [*((n, "deploy/kubernetes") for n in manifest_images()),
                         *((n, "compose") for n in compose_images())]:
        assert name in built or PULLED.match(name), f"{source} names the image {name}, which nothing builds"
    assert set(built) == {"loadwatch-locust", "loadwatch-exporter", "loadwatch-vllm-router", "loadwatch"}


def test_every_image_built_here_has_a_build_line_in_the_docs_with_the_manifests_tag():
    built, docs, pinned = dockerfiles(), documented(), manifest_images()
    for name, path in built.items():
        assert name in docs, f"no page of {', '.join(p.name for p in PAGES)} builds {name} ({path.relative_to(REPO)})"
        dockerfile, tag = docs[name]
        assert REPO / dockerfile == path, f"the docs build {name} from {dockerfile}, not {path.relative_to(REPO)}"
        if pinned.get(name):
            assert tag == pinned[name], f"the docs tag {name} {tag}; the manifests pull {pinned[name]}"


def test_compose_builds_its_own_images_from_the_same_dockerfiles():
    built = dockerfiles()
    for name, dockerfile in compose_images().items():
        if name in built:
            assert dockerfile is not None and REPO / dockerfile == built[name], f"compose: {name} from {dockerfile}"


def test_the_fleets_images_are_named_by_its_manifests():
    """The router's and the load host's images are the fleet's: the build step a fleet needs."""
    images = set(manifest_images())
    assert {"loadwatch-vllm-router", "loadwatch", "loadwatch-locust", "loadwatch-exporter"} <= images
