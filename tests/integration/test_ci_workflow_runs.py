"""The CI gates of the docs, run as their platforms run them: two release tags in a row, v1.0.0 against
the test server, then v1.1.0 against one that answers more slowly. Each pipeline starts in a fresh
workspace (a fresh checkout shares nothing), and what a platform keeps from one pipeline to the next
is kept as that platform scopes it. The second tag must be gated against the first: compare exits 3,
the history gets both runs, the release to beat stays the first, and each job says in its summary (its
log on GitLab) that the history gate could not judge yet rather than pass in silence.

GitHub (docs/ci/github-actions.yml): the `run:` steps in order, in bash as GitHub runs them, with the
job's environment and a step's `if:` judged from CONDITIONS. Its `uses:` steps are stood in for by USES,
and only those (a new action fails here, to be modelled):
- actions/cache restores only what a run of the same ref or of the default branch saved ("Restrictions
  for accessing a cache": a tag is a ref of its own), an exact key first, then by prefix, then the
  restore-keys, the newest of each;
- actions/upload-artifact keeps an artifact by run and name, its files under the paths' common folder;
- `gh`, which GitHub's runners carry, is this module run as a program (`gh` below): the REST API's list
  of artifacts, newest first, with the job's token and its permissions, and `gh run download`.
`pip install "$LOADWATCH_PIP"` is this checkout's virtual environment on PATH (tests/integration/
test_wheel.py installs the wheel).

GitLab (docs/ci/gitlab-ci.yml): the job's rules, variables and script, the script in one bash with -eo
pipefail as the runner runs it, and GitLab's cache: one for every pipeline whose key resolves the same,
whatever its ref, with GitLab's suffix for protected refs (release tags are protected here), pulled
before the script and pushed after it by its policy and `when`; the runners share it (distributed).

Each load test's `-t 2m` runs 6 s here."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

REPO = Path(__file__).resolve().parents[2]  # not tests.conftest's: this module also runs as `gh`
WORKFLOW = REPO / "docs" / "ci" / "github-actions.yml"
GITLAB_JOB = REPO / "docs" / "ci" / "gitlab-ci.yml"
BIN = Path(sys.executable).parent
KEY = "ci-key-0123"
REPOSITORY = "acme/inference"
DEFAULT_BRANCH = "refs/heads/main"
LOAD = (" -t 2m ", " -t 6s ")  # the recipes' load test, shortened


# ---------------------------------------------------------------------------------------------- GitHub

# A step's `if:` as GitHub judges it, from whether a step before it failed and the run's ref.
CONDITIONS = {
    None: lambda failed, ref: not failed,
    "${{ !cancelled() }}": lambda failed, ref: True,
    "${{ success() && startsWith(github.ref, 'refs/tags/') }}": lambda failed, ref: not failed
    and ref.startswith("refs/tags/"),
    "${{ !cancelled() && startsWith(github.ref, 'refs/tags/') }}": lambda failed, ref: ref.startswith("refs/tags/"),
}
# How GitHub runs a `run:` step on Linux, by its `shell:`.
SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


@dataclass
class Run:
    number: int
    ref: str
    workspace: Path
    context: dict[str, str]  # the expressions ${{ ... }} the workflow may use, and their values
    summary: list[str] = field(default_factory=list)  # what the steps appended to $GITHUB_STEP_SUMMARY

    @property
    def tag(self) -> str:
        return self.ref.removeprefix("refs/tags/")

    def expand(self, text: str) -> str:
        def value(match: re.Match) -> str:
            assert match.group(1) in self.context, f"add the expression {match.group(0)!r} to Run.context"
            return self.context[match.group(1)]
        return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", value, text)


class GitHub:
    """What GitHub keeps of a repository from run to run: its caches, by the ref that saved them and
    their key, and its artifacts, by run (artifacts.json, newest first, as the REST API lists them,
    for the `gh` stand-in to read)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()
        self.caches: dict[tuple[str, str], Path] = {}  # oldest first
        self.runs = 0
        self._write("artifacts.json", [])
        self._write("tokens.json", {})

    def _write(self, name: str, value) -> None:
        (self.root / name).write_text(json.dumps(value))

    def _read(self, name: str):
        return json.loads((self.root / name).read_text())

    def start(self, ref: str, permissions: dict[str, str] | None, workspace: Path, server_url: str) -> Run:
        self.runs += 1
        token = f"ghs_run{self.runs}"
        self._write("tokens.json", {**self._read("tokens.json"), token: permissions or {}})
        workspace.mkdir()
        return Run(self.runs, ref, workspace, {
            "github.ref": ref, "github.ref_name": ref.rsplit("/", 1)[-1], "github.run_id": str(1000 + self.runs),
            "github.token": token, "secrets.GITHUB_TOKEN": token, "vars.VLLM_URL": server_url,
            "vars.LOADWATCH_PIP": "loadwatch", "secrets.VLLM_API_KEY": KEY})

    def restore_cache(self, run: Run, key: str, restore_keys: list[str], path: Path) -> None:
        for scope in dict.fromkeys([run.ref, DEFAULT_BRANCH]):  # a tag's run sees its own ref, then main
            saved = [(k, folder) for (ref, k), folder in reversed(self.caches.items()) if ref == scope]
            for wanted, exact in ((key, True), (key, False), *((k, False) for k in restore_keys)):
                for k, folder in saved:
                    if k == wanted if exact else k.startswith(wanted):
                        shutil.copytree(folder, path, dirs_exist_ok=True)
                        return

    def save_cache(self, run: Run, key: str, path: Path) -> None:
        if (run.ref, key) in self.caches or not path.exists():  # a key is written once: the save warns
            return
        folder = self.root / "caches" / str(len(self.caches))
        shutil.copytree(path, folder)
        self.caches[(run.ref, key)] = folder

    def upload_artifact(self, run: Run, name: str, paths: list[str], if_no_files: str) -> int:
        listed = self._read("artifacts.json")
        if any(a["name"] == name and a["workflow_run"]["id"] == int(run.context["github.run_id"]) for a in listed):
            return 1  # v4 and later: an artifact's name is unique within a run
        present = [run.workspace / p for p in paths if (run.workspace / p).exists()]
        if not present:
            return 1 if if_no_files == "error" else 0
        common = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in present]))
        number = len(listed) + 1
        files = self.root / "artifacts" / str(number)
        for path in present:
            for source in ([path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]):
                relative = source.relative_to(common)
                if not any(part.startswith(".") for part in relative.parts):  # include-hidden-files: false
                    (files / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, files / relative)
        self._write("artifacts.json", [{
            "id": number, "name": name, "expired": False, "created_at": f"2026-12-01T10:{number:02d}:00Z",
            "workflow_run": {"id": int(run.context["github.run_id"]), "head_branch": run.tag}}, *listed])
        return 0


def _with(step: dict, run: Run) -> dict[str, str]:
    return {k: run.expand(str(v)) for k, v in step.get("with", {}).items()}


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


# The actions the recipe uses, as GitHub runs them: each takes the platform, the run and its `with:`,
# and returns the step's exit code.
USES = {
    "actions/checkout@v5": lambda github, run, given: 0,  # the workspace is a fresh checkout
    "actions/setup-python@v6": lambda github, run, given: 0,  # this Python is on PATH
    "actions/cache/restore@v5": lambda github, run, given: github.restore_cache(
        run, given["key"], _lines(given.get("restore-keys", "")), run.workspace / given["path"]) or 0,
    "actions/cache/save@v5": lambda github, run, given: github.save_cache(
        run, given["key"], run.workspace / given["path"]) or 0,
    "actions/upload-artifact@v6": lambda github, run, given: github.upload_artifact(
        run, given.get("name", "artifact"), _lines(given["path"]), given.get("if-no-files-found", "warn")),
}


def github_pipeline(github: GitHub, workflow: Path, ref: str, server_url: str, workspace: Path) -> tuple[Run, dict]:
    """Each step of the workflow in order, as a run of `ref` in a fresh checkout: the run and the exit
    codes of its `run:` steps by name (a step its `if:` skipped is absent)."""
    job = yaml.safe_load(workflow.read_text())["jobs"]["gate"]
    run = github.start(ref, job.get("permissions"), workspace, server_url)
    temp = workspace.parent / f"{workspace.name}-runner-temp"
    temp.mkdir()
    env = {**os.environ, **{k: run.expand(v) for k, v in job["env"].items()},
           "PATH": f"{temp}:{BIN}:{os.environ['PATH']}", "CI": "true", "GITHUB_ACTIONS": "true",
           "GITHUB_REF": ref, "GITHUB_REF_NAME": run.tag, "GITHUB_REF_TYPE": "tag", "GITHUB_REPOSITORY": REPOSITORY,
           "GITHUB_RUN_ID": run.context["github.run_id"], "GITHUB_WORKSPACE": str(workspace),
           "RUNNER_TEMP": str(temp), "FAKE_GITHUB": str(github.root),
           "LOCUST_METRICS_PORT": "0"}  # the tier beside this one may hold the default port
    (temp / "gh").write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} \"$@\"\n")
    (temp / "gh").chmod(0o755)
    codes: dict[str, int] = {}
    failed = False
    for number, step in enumerate(job["steps"]):
        name = step.get("name", step.get("uses", f"step {number}"))
        condition = step.get("if")
        assert condition in CONDITIONS, f"add the condition {condition!r} to CONDITIONS"
        if not CONDITIONS[condition](failed, ref):
            continue
        if "uses" in step:
            assert step["uses"] in USES, f"{step['uses']} is not modelled: add it to USES, as GitHub runs it"
            code = USES[step["uses"]](github, run, _with(step, run))
            assert code == 0, f"{name}: exit {code}"
            continue
        script = step["run"]
        if script.startswith('pip install "$LOADWATCH_PIP"'):
            continue
        if LOAD[0] in script:
            script = script.replace(*LOAD)
        assert " -t 2m " not in script
        summary = temp / f"summary-{number}.md"
        summary.touch()
        (temp / "step.sh").write_text(script)
        assert step.get("shell") in SHELLS, f"add the shell {step.get('shell')!r} to SHELLS"
        done = subprocess.run([*SHELLS[step.get("shell")], str(temp / "step.sh")], cwd=workspace,
                              env={**env, **{k: run.expand(str(v)) for k, v in step.get("env", {}).items()},
                                   "GITHUB_STEP_SUMMARY": str(summary)},
                              capture_output=True, text=True, timeout=300)
        said = done.stdout + done.stderr
        assert "Traceback" not in said, said
        run.summary.append(summary.read_text())
        codes[name] = done.returncode
        failed = failed or done.returncode != 0
        if done.returncode not in (0, 3):
            raise AssertionError(f"{name}: exit {done.returncode}\n{said[-6000:]}")
    return run, codes


def test_a_tag_is_gated_against_the_last_tag_on_github(fake_server, tmp_path):
    """The recipe's second tag is compared with its first (compare exits 3 on the slower server),
    though GitHub shows a tag's run no cache of another tag."""
    github = GitHub(tmp_path / "github")
    served = ("--tokens", "60", "--itl", "0.01", "--max-model-len", "4096", "--authorization", f"Bearer {KEY}")
    fast = fake_server("--ttft", "0.05", *served)
    first, first_codes = github_pipeline(github, WORKFLOW, "refs/tags/v1.0.0", fast.url, tmp_path / "v1.0.0")
    slow = fake_server("--ttft", "0.15", *served)
    second, second_codes = github_pipeline(github, WORKFLOW, "refs/tags/v1.1.0", slow.url, tmp_path / "v1.1.0")

    said = "\n".join(second.summary)
    assert second_codes.get("Against the last release") == 3, (
        f"v1.1.0 was not gated against v1.0.0 (its steps' exit codes {second_codes}); its summary:\n{said}")
    assert "- FAIL: ttft_p99_ms of this +" in (second.workspace / "compare.md").read_text()  # the artifact says why
    assert "- FAIL: ttft_p99_ms of this +" in said  # and so does the job's summary
    for run in (first, second):  # too few runs for the history gate: said, not passed in silence
        assert f"**History gate: not judged yet** (its exit 1 let through): cannot judge {run.tag}: the gate " \
               "needs 3 comparable runs" in "\n".join(run.summary), run.summary
    assert first_codes == {"The last release's state": 0, "Load test": 0, "Against the last release": 0,
                           "Against the history": 0, "Keep this run as the release to beat": 0}, first_codes
    assert "No release to compare with yet" in "\n".join(first.summary)
    assert second_codes == {"The last release's state": 0, "Load test": 0, "Against the last release": 3,
                            "Against the history": 0}, second_codes
    assert "State of the run of v1.0.0 (run 1001)" in said

    # What v1.1.0 left for the next release: the history of both, and v1.0.0 still the release to beat.
    state = tmp_path / "next"
    subprocess.run([sys.executable, __file__, "run", "download", second.context["github.run_id"], "--repo", REPOSITORY,
                    "--name", "loadwatch-state", "--dir", str(state)], check=True, env={
                        **os.environ, "GH_TOKEN": second.context["github.token"], "GITHUB_REPOSITORY": REPOSITORY,
                        "FAKE_GITHUB": str(github.root)})
    assert (state / "release" / "results.json").read_bytes() == (first.workspace / "run" / "results.json").read_bytes()
    page = (second.workspace / "history.html").read_text()
    assert "v1.0.0" in page and "v1.1.0" in page
    # The rule that sank the old recipe, as modelled: a cache saved by one tag's run is not another's.
    (tmp_path / "saved").mkdir()
    github.save_cache(first, "probe", tmp_path / "saved")
    github.restore_cache(second, "probe", [], tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


# ------------------------------------------------------------------------- the `gh` stand-in, a program

def _latest_artifact(listing: dict) -> str:
    live = [a for a in listing["artifacts"] if not a["expired"]]
    newest = max(live, key=lambda a: a["created_at"], default=None)
    return "" if newest is None else f"{newest['workflow_run']['id']} {newest['workflow_run']['head_branch']}"


# The jq filters the recipe gives `gh api --jq`, as Python; where jq is installed, checked against it.
JQ = {'[.artifacts[] | select(.expired | not)] | max_by(.created_at) | select(.) | '
      '"\\(.workflow_run.id) \\(.workflow_run.head_branch)"': _latest_artifact}


def gh(argv: list[str]) -> int:
    """`gh api` on the REST API's list of a repository's artifacts, and `gh run download`, answered from
    what earlier runs uploaded ($FAKE_GITHUB), with GitHub's rules: a token in GH_TOKEN, the job's
    `actions: read` permission, the artifacts newest first, expired ones listed but not downloadable."""
    root = Path(os.environ["FAKE_GITHUB"])
    token = os.environ.get("GH_TOKEN")
    if not token:
        print("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.",
              file=sys.stderr)
        return 4
    permissions = json.loads((root / "tokens.json").read_text()).get(token)
    if permissions is None or permissions.get("actions") not in ("read", "write"):
        print("gh: Resource not accessible by integration (HTTP 403)", file=sys.stderr)
        return 1
    artifacts = json.loads((root / "artifacts.json").read_text())
    parser = argparse.ArgumentParser(prog="gh")
    commands = parser.add_subparsers(dest="command", required=True)
    api = commands.add_parser("api")
    api.add_argument("endpoint")
    api.add_argument("-q", "--jq")
    download = commands.add_parser("run").add_subparsers(dest="action", required=True).add_parser("download")
    download.add_argument("run_id")
    download.add_argument("-R", "--repo", required=True)  # in this model: the workspace has no git remote
    download.add_argument("-n", "--name", action="append", required=True)
    download.add_argument("-D", "--dir", default=".")
    args = parser.parse_args(argv)
    if args.command == "api":
        endpoint = urlsplit(args.endpoint)
        assert endpoint.path == f"repos/{os.environ['GITHUB_REPOSITORY']}/actions/artifacts", args.endpoint
        query = parse_qs(endpoint.query)
        listed = [a for a in artifacts if a["name"] in query.get("name", [a["name"]])]
        body = {"total_count": len(listed), "artifacts": listed[:int(query.get("per_page", ["30"])[0])]}
        assert args.jq in JQ, f"model the jq filter {args.jq!r} in JQ"
        answer = JQ[args.jq](body)
        if shutil.which("jq"):
            real = subprocess.run(["jq", "-r", args.jq], input=json.dumps(body), capture_output=True, text=True)
            assert real.stdout.strip() == answer, (real.stdout, real.stderr, answer)
        print(answer)
        return 0
    assert args.repo == os.environ["GITHUB_REPOSITORY"] and len(args.name) == 1, argv
    found = [a for a in artifacts if a["workflow_run"]["id"] == int(args.run_id) and a["name"] == args.name[0]]
    if not found or found[0]["expired"]:
        print("no artifact matches any of the names provided", file=sys.stderr)
        return 1
    shutil.copytree(root / "artifacts" / str(found[0]["id"]), args.dir, dirs_exist_ok=True)  # one name: no subfolder
    return 0


# ---------------------------------------------------------------------------------------------- GitLab

# A rule's `if:` as GitLab judges it, from the pipeline's variables.
RULES = {"$CI_COMMIT_TAG": lambda variables: bool(variables.get("CI_COMMIT_TAG"))}
# The job's keywords, and what stands in for each here (a new keyword fails here, to be modelled).
KEYWORDS = {"stage": "the one job of the pipeline", "image": "this Python", "timeout": "the test's own",
            "resource_group": "pipelines one after the other", "rules": "RULES", "variables": "expanded",
            "cache": "GitLab's rules, below", "script": "bash -eo pipefail", "artifacts": "the workspace's files"}


def _variables(text: str, variables: dict[str, str]) -> str:
    """$NAME and ${NAME} of a variable's value or a cache key, as GitLab expands them."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), ""), text)


def gitlab_pipeline(caches: dict[str, Path], tag: str, server_url: str, workspace: Path) -> tuple[int, str, str]:
    """The job in a tag's pipeline: its exit code, its log and its resolved cache key."""
    job = yaml.safe_load(GITLAB_JOB.read_text())["loadwatch"]
    assert set(job) <= set(KEYWORDS), f"model the keywords {set(job) - set(KEYWORDS)} in KEYWORDS"
    variables = {"CI": "true", "GITLAB_CI": "true", "CI_COMMIT_TAG": tag, "CI_COMMIT_REF_NAME": tag,
                 "CI_COMMIT_REF_PROTECTED": "true", "CI_COMMIT_SHORT_SHA": "0123abcd", "CI_JOB_NAME": "loadwatch",
                 "VLLM_URL": server_url, "VLLM_API_KEY": KEY, "LOADWATCH_PIP": "loadwatch"}
    for rule in job["rules"]:
        assert rule.get("if") in (None, *RULES), f"add the rule {rule['if']!r} to RULES"
    rule = next(r for r in job["rules"] if "if" not in r or RULES[r["if"]](variables))
    assert rule.get("when", "on_success") == "on_success", f"a tag's pipeline would not run the job: {rule}"
    for name, value in {**job.get("variables", {}), **rule.get("variables", {})}.items():
        variables[name] = _variables(str(value), variables)
    cache = job["cache"]
    key = _variables(cache["key"], variables) + ("-protected" if variables["CI_COMMIT_REF_PROTECTED"] == "true"
                                                  else "-non_protected")
    policy = _variables(cache.get("policy", "pull-push"), variables)
    assert policy in ("pull", "push", "pull-push"), policy
    workspace.mkdir()
    if policy != "push" and key in caches:
        shutil.copytree(caches[key], workspace, dirs_exist_ok=True)
    lines = [line for line in job["script"] if not line.startswith('pip install "$LOADWATCH_PIP"')]
    script = "\n".join(line.replace(*LOAD) for line in lines)
    assert " -t 2m " not in script
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=workspace, capture_output=True, text=True,
                          env={**os.environ, **variables, "PATH": f"{BIN}:{os.environ['PATH']}",
                               "LOCUST_METRICS_PORT": "0"}, timeout=300)
    log = done.stdout + done.stderr
    assert "Traceback" not in log and done.returncode in (0, 3), log[-6000:]
    when = cache.get("when", "on_success")
    if policy != "pull" and (when == "always" or (when == "on_success") == (done.returncode == 0)):
        saved = workspace.parent / f"cache-{tag}"
        for path in cache["paths"]:
            if (workspace / path).exists():
                shutil.copytree(workspace / path, saved / path)
        caches[key] = saved
    return done.returncode, log, key


def test_a_tag_is_gated_against_the_last_tag_on_gitlab(fake_server, tmp_path):
    caches: dict[str, Path] = {}
    served = ("--tokens", "60", "--itl", "0.01", "--max-model-len", "4096", "--authorization", f"Bearer {KEY}")
    fast = fake_server("--ttft", "0.05", *served)
    first, first_log, first_key = gitlab_pipeline(caches, "v1.0.0", fast.url, tmp_path / "v1.0.0")
    slow = fake_server("--ttft", "0.15", *served)
    second, second_log, second_key = gitlab_pipeline(caches, "v1.1.0", slow.url, tmp_path / "v1.1.0")

    assert first_key == second_key  # one cache for every release tag
    assert (first, second) == (0, 3), second_log[-6000:]
    assert "loadwatch: FAIL: ttft_p99_ms of this +" in second_log
    assert "- FAIL: ttft_p99_ms of this +" in (tmp_path / "v1.1.0" / "compare.md").read_text()
    for tag, log in (("v1.0.0", first_log), ("v1.1.0", second_log)):
        said = f"History gate: not judged yet (its exit 1 let through): cannot judge {tag}: the gate needs 3"
        assert said in log and said in (tmp_path / tag / "history-gate.txt").read_text(), log[-3000:]
    artifacts = yaml.safe_load(GITLAB_JOB.read_text())["loadwatch"]["artifacts"]
    assert artifacts["when"] == "always" and "history-gate.txt" in artifacts["paths"]  # the job keeps what it said
    release = caches[second_key] / "loadwatch-state" / "release" / "results.json"
    assert release.read_bytes() == (tmp_path / "v1.0.0" / "run" / "results.json").read_bytes()
    page = (tmp_path / "v1.1.0" / "history.html").read_text()
    assert "v1.0.0" in page and "v1.1.0" in page


if __name__ == "__main__":  # run as `gh` by the GitHub workflow's steps
    sys.exit(gh(sys.argv[1:]))
