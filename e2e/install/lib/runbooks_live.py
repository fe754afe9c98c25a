"""Issue 39, "Runbooks whose commands run": every command of docs/RUNBOOKS.md's ```sh
blocks, run against the e2e cluster the way the on-call would paste it. Run by
lib/runbooks.sh (runbooks_live) after an install:

    python3 runbooks_live.py --root DIR --method kustomize|helm \
        --pod NAME --ip IP --uid UID [--list] [--timeout S] RUNBOOKS.md

The blocks are read as tests/runbook_commands.rs reads them: one command per line (a
trailing `\\` joins the next), a line `# kustomize` or `# helm` makes the next command
that install's only, `# cert-manager` marks one this cluster cannot run (no cert-manager
in e2e: printed `skip (cert-manager): …`); any other comment, or a block of another
language, is a finding. `<pod>` (a pod of the node DaemonSet), `<ip>` (its IP) and
`<uid>` (a pod's uid) become the names given; any other `<…>` left is a finding.

Nothing in the cluster changes. Each simple command of a line (pipelines and `while`
loops included) is classified: kubectl's and helm's read-only subcommands run as they
are; their mutating ones run as a server-side dry run (`--dry-run=server` appended to
that command, before any `|`; `helm uninstall` takes the plain `--dry-run`); `kubectl
rollout restart`, which has no `--dry-run`, runs as the very patch it sends
(`kubectl.kubernetes.io/restartedAt` on the pod template) with `--dry-run=server`;
`kubectl edit`, any other kubectl or helm subcommand, any other program than the filters
listed in FILTERS, and a `$(…)` that runs anything but those, are findings, not run.

Each line runs with `bash -c` (cwd --root, KUBECONFIG from the environment, `helm` being
$PRESTOP_HELM when set), stdin empty, --timeout seconds (60). It passes when its first
stage (the kubectl or helm part) exits 0 and every later stage too, where a `grep` that
matches nothing (1) is fine, and a stage whose reader stopped early (141, SIGPIPE) is
too; a loop is not judged. The e2e cluster's known limits are skipped with their reason,
each matched on the command and its error text together: `kubectl top` without the
Metrics API (no metrics-server), `get servicemonitor` without the resource type (no
Prometheus operator CRDs), `logs --previous` of a container that never restarted.

Prints one line per command (`ok: …`, `skip (reason): …`, `FAIL: …` with the first lines
of what it said), then `N ran, M skipped, K failed` (disjoint: ran = ran and passed).
Exits 1 on any failure or finding. --list prints what it would run (`run: …`, after the
substitutions and with the dry-run flags) and the static findings, and runs nothing.
"""
import argparse
import datetime
import os
import re
import signal
import subprocess
import sys
import tempfile

MARKERS = {"kustomize", "helm", "cert-manager"}

# Placeholders this test fills, and what their values may look like (the values go into a
# shell line unquoted).
PLACEHOLDERS = {
    "pod": re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
    "ip": re.compile(r"^[0-9a-fA-F.:]+$"),
    "uid": re.compile(r"^[0-9a-fA-F-]+$"),
}
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_.:-]*>")

# Programs a line may pipe through: they read and print, nothing else.
FILTERS = {
    "grep", "egrep", "fgrep", "base64", "openssl", "sha256sum", "printf", "echo", "read",
    "jq", "head", "tail", "sort", "uniq", "wc", "cut", "awk", "tr", "column", "true",
}
GREPS = {"grep", "egrep", "fgrep"}

# kubectl's global flags that take a value as the next word (before the subcommand).
KUBECTL_GLOBAL_VALUE = {
    "-n", "--namespace", "--context", "--cluster", "--user", "--kubeconfig", "-s",
    "--server", "--as", "--as-group", "--as-uid", "--request-timeout", "--token",
    "--certificate-authority", "--client-certificate", "--client-key", "--tls-server-name",
    "--cache-dir", "--profile", "--profile-output", "-v", "--v", "--log-file",
}
# Subcommands named by two words.
KUBECTL_TWO_WORDS = {"rollout", "auth", "top", "config", "certificate"}
KUBECTL_READ = {
    "get", "describe", "logs", "explain", "api-resources", "api-versions", "version",
    "cluster-info", "events", "wait", "top pod", "top pods", "top po", "top node",
    "top nodes", "top no", "auth can-i", "auth whoami", "rollout status",
    "rollout history", "config view", "config current-context", "config get-contexts",
}
# Mutating subcommands that take --dry-run=server (each checked in `kubectl … --help`).
KUBECTL_DRY_RUN = {
    "patch", "delete", "apply", "annotate", "label", "scale", "create", "replace", "set",
    "autoscale", "expose", "run", "cordon", "uncordon", "drain", "taint", "rollout undo",
    "auth reconcile",
}
KUBECTL_NO_DRY_RUN = {
    "edit": "kubectl edit opens an editor and has no dry run",
    "rollout pause": "kubectl rollout pause has no dry run",
    "rollout resume": "kubectl rollout resume has no dry run",
}

HELM_GLOBAL_VALUE = {
    "-n", "--namespace", "--kube-context", "--kubeconfig", "--kube-apiserver",
    "--kube-as-user", "--kube-as-group", "--kube-ca-file", "--kube-token",
    "--registry-config", "--repository-cache", "--repository-config", "--burst-limit",
    "--qps", "--content-cache",
}
HELM_READ = {
    "status", "get", "list", "ls", "history", "hist", "show", "inspect", "template",
    "version", "lint", "env", "search", "verify",
}
# Helm 4: upgrade, install and rollback take --dry-run=server; uninstall a plain --dry-run.
HELM_DRY_RUN = {
    "upgrade": "--dry-run=server",
    "install": "--dry-run=server",
    "rollback": "--dry-run=server",
    "uninstall": "--dry-run",
    "delete": "--dry-run",
    "del": "--dry-run",
    "un": "--dry-run",
}

# Shell reserved words as the parser below needs them.
OPENERS = {"while", "until", "for", "select", "if", "case", "{"}
CLOSERS = {"done", "fi", "esac", "}"}
PREFIXES = {"do", "then", "else", "elif", "!", "time"}


class ParseError(Exception):
    pass


# --- the markdown -------------------------------------------------------------------------


def commands(markdown):
    """[(section, tag, line)] and [problem]: tests/runbook_commands.rs's `commands`."""
    out, problems = [], []
    section, in_block, tag, pending = "introduction", False, None, ""
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("## "):
            section = line[3:]
        if line.startswith("```"):
            if not in_block and line not in ("```sh", "```"):
                problems.append(f"line {number}: a block of another language ({line}); commands go in ```sh")
            if in_block and pending:
                problems.append(f"line {number}: the block ends inside a command continued with \\")
                pending = ""
            in_block = line == "```sh" and not in_block
            tag = None
            continue
        if not in_block:
            continue
        trimmed = line.strip()
        if trimmed.startswith("#"):
            comment = trimmed[1:].strip()
            if comment in MARKERS:
                tag = comment
            else:
                problems.append(f"line {number} ({section}): a comment in a command block: {trimmed}")
            continue
        if not trimmed:
            continue
        if trimmed.endswith("\\"):
            pending += trimmed[:-1] + " "
            continue
        out.append((section, tag, pending + trimmed))
        pending = ""
        tag = None
    return out, problems


# --- the shell, as far as the runbooks need it --------------------------------------------


class Word:
    def __init__(self, text, start, end, raw):
        self.text, self.start, self.end = text, start, end
        self.quoted = raw != text


def skip_quoted(line, i, quote):
    """The index after the closing `quote` of a quote opened before i."""
    while i < len(line):
        if quote == '"' and line[i] == "\\":
            i += 2
            continue
        if line[i] == quote:
            return i + 1
        i += 1
    raise ParseError("unbalanced quotes")


def skip_substitution(line, i):
    """The index after the `)` closing a `$(` that ends before i."""
    depth = 1
    while i < len(line):
        c = line[i]
        if c in "'\"":
            i = skip_quoted(line, i + 1, c)
            continue
        if c == "\\":
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ParseError("unbalanced $(")


OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "(", ")", "\n")



def substitution(line, i, substitutions):
    """At a `$(…)` or a backquoted command at `i`: records its command in `substitutions`
    and returns the index past it (quoted or not, it runs all the same); else None."""
    if line.startswith("$(", i):
        j = skip_substitution(line, i + 2)
        substitutions.append(line[i + 2 : j - 1])
        return j
    if line[i] == "`":
        j = line.find("`", i + 1)
        if j < 0:
            raise ParseError("unbalanced `")
        substitutions.append(line[i + 1 : j])
        return j + 1
    return None

def tokenize(line):
    """Words (unquoted, with their spans) and operators; the `$(…)` and `…` texts."""
    tokens, substitutions = [], []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in " \t":
            i += 1
            continue
        if c == "#":
            break
        op = next((o for o in OPERATORS if line.startswith(o, i)), None)
        if op:
            tokens.append(op)
            i += len(op)
            continue
        start, value = i, []
        while i < n:
            c = line[i]
            if c in " \t\n|;()":
                break
            if c == "&":
                if i > start and line[i - 1] in "<>":  # 2>&1
                    value.append(c)
                    i += 1
                    continue
                break
            if c == "'":
                j = skip_quoted(line, i + 1, "'")
                value.append(line[i + 1 : j - 1])
                i = j
            elif c == '"':
                i += 1
                while True:
                    if i >= n:
                        raise ParseError("unbalanced quotes")
                    if line[i] == '"':
                        i += 1
                        break
                    if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\$`':
                        value.append(line[i + 1])
                        i += 2
                    elif (j := substitution(line, i, substitutions)) is not None:
                        value.append(line[i:j])
                        i = j
                    else:
                        value.append(line[i])
                        i += 1
            elif c == "\\":
                value.append(line[i + 1 : i + 2])
                i += 2
            elif (j := substitution(line, i, substitutions)) is not None:
                value.append(line[i:j])
                i = j
            else:
                value.append(c)
                i += 1
        text = "".join(value)
        tokens.append(Word(text, start, i, line[start:i]))
    return tokens, substitutions


class Simple:
    """A simple command: its words (assignments dropped) and its top-level stage."""

    def __init__(self, words, stage):
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0].text) and not words[0].quoted:
            words = words[1:]
        self.words, self.stage = words, stage
        self.name = os.path.basename(words[0].text) if words else ""


def parse(line):
    """The simple commands, the top-level pipeline's stages (each named by its first
    command or its compound keyword), and whether the line is a list (`;`, `&&`, … at
    the top level)."""
    tokens, substitutions = tokenize(line)
    simples, stages, is_list = [], [None], False
    depth, at_start, in_clause, current = 0, True, False, []

    def finish():
        nonlocal current
        if current:
            simples.append(Simple(current, len(stages) - 1))
            if stages[-1] is None:
                stages[-1] = simples[-1].name
        current = []

    for token in tokens:
        if isinstance(token, str):
            finish()
            if token == "(":
                if depth == 0 and stages[-1] is None:
                    stages[-1] = "("
                depth += 1
            elif token == ")":
                depth -= 1
            elif token in ("|", "|&"):
                if depth == 0:
                    stages.append(None)
            elif token == ";;":
                raise ParseError("case … esac is not supported")
            elif depth == 0:
                is_list = True
            at_start, in_clause = True, False
            continue
        if at_start and not token.quoted:
            if token.text in OPENERS:
                if token.text == "case":
                    raise ParseError("case … esac is not supported")
                if depth == 0 and stages[-1] is None:
                    stages[-1] = token.text
                depth += 1
                # `for x in a b;` is no command; after `while`, `if`, `{` one follows.
                in_clause = token.text in ("for", "select")
                at_start = not in_clause
                continue
            if token.text in CLOSERS:
                depth -= 1
                at_start = False
                continue
            if token.text in PREFIXES:
                continue
        if in_clause:
            continue
        current.append(token)
        at_start = False
    finish()
    if depth != 0:
        raise ParseError("unbalanced compound command")
    return simples, stages, is_list, substitutions


def split_subcommand(args, global_value, two_words):
    """(subcommand words, index of the first word after them) of kubectl's or helm's args."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if "=" not in args[i] and args[i] in global_value else 1
    if i >= len(args):
        return [], i
    if args[i] in two_words and i + 1 < len(args) and not args[i + 1].startswith("-"):
        return [args[i], args[i + 1]], i + 2
    return [args[i]], i + 1


# --- one line: what to run ----------------------------------------------------------------


class Plan:
    def __init__(self, section, line):
        self.section = section
        self.original = line
        self.command = line  # as it runs
        self.problems = []  # findings: not run
        self.stages = []
        self.first = None  # the first stage's kubectl or helm command (its words)


def restart_patch():
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ("--type=strategic -p '{\"spec\":{\"template\":{\"metadata\":{\"annotations\":"
            f"{{\"kubectl.kubernetes.io/restartedAt\":\"{now}\"}}}}}}}}}}'")


def check_substitution(text, plan):
    """A `$(…)` may run only read-only commands (it is not rewritten)."""
    try:
        simples, _, _, inner = parse(text)
    except ParseError as e:
        plan.problems.append(f"cannot read $({text}): {e}")
        return
    for simple in simples:
        words = [w.text for w in simple.words]
        if simple.name == "kubectl":
            sub, _ = split_subcommand(words[1:], KUBECTL_GLOBAL_VALUE, KUBECTL_TWO_WORDS)
            if " ".join(sub) not in KUBECTL_READ:
                plan.problems.append(f"$({text}) runs kubectl {' '.join(sub)}: not run")
        elif simple.name == "helm":
            sub, _ = split_subcommand(words[1:], HELM_GLOBAL_VALUE, set())
            if not sub or sub[0] not in HELM_READ:
                plan.problems.append(f"$({text}) runs helm {' '.join(sub)}: not run")
        elif simple.name not in FILTERS:
            plan.problems.append(f"$({text}) runs {simple.name}, not known to be harmless: not run")
    for t in inner:
        check_substitution(t, plan)


def plan_line(section, line, values):
    plan = Plan(section, line)
    # Placeholders first: `<pod>` would read as a redirection.
    for name, value in values.items():
        if f"<{name}>" in line:
            if value is None:
                plan.problems.append(f"<{name}> needs --{name}")
            else:
                line = line.replace(f"<{name}>", value)
    plan.command = line
    unknown = sorted(set(PLACEHOLDER.findall(line)) - {f"<{n}>" for n in values})
    if unknown:
        plan.problems.append(
            f"placeholder {', '.join(unknown)} unknown to this test (it fills "
            f"{', '.join(f'<{n}>' for n in values)})"
        )
    if plan.problems:
        return plan
    try:
        simples, stages, is_list, substitutions = parse(line)
    except ParseError as e:
        plan.problems.append(f"cannot read the line as this test reads the shell: {e}")
        return plan
    plan.stages = stages
    if is_list:
        plan.problems.append("more than one pipeline on the line (;, &&, ||, &): one command per line")
    for text in substitutions:
        check_substitution(text, plan)
    edits = []  # (start, end, replacement)
    tools = 0
    for simple in simples:
        words = [w.text for w in simple.words]
        if simple.name == "kubectl":
            tools += 1
            sub, after = split_subcommand(words[1:], KUBECTL_GLOBAL_VALUE, KUBECTL_TWO_WORDS)
            key = " ".join(sub)
            if simple.stage == 0 and plan.first is None:
                plan.first = ("kubectl", sub, words[1 + after :])
            if key in KUBECTL_READ:
                continue
            if key in KUBECTL_NO_DRY_RUN:
                plan.problems.append(f"{KUBECTL_NO_DRY_RUN[key]}: not run")
                continue
            if key == "rollout restart":
                # No --dry-run: the patch it sends, as a server-side dry run.
                first = simple.words[1 + after - 2]
                edits.append((first.start, simple.words[after].end, "patch"))
                edits.append((simple.words[-1].end, simple.words[-1].end,
                              f" {restart_patch()} --dry-run=server"))
                continue
            if key in KUBECTL_DRY_RUN or (sub and sub[0] in KUBECTL_DRY_RUN):
                add_dry_run(simple, "--dry-run=server", edits, plan)
                continue
            plan.problems.append(f"kubectl {key or '(no subcommand)'} is not known to be read-only: not run (teach this test)")
        elif simple.name == "helm":
            tools += 1
            sub, after = split_subcommand(words[1:], HELM_GLOBAL_VALUE, set())
            if simple.stage == 0 and plan.first is None:
                plan.first = ("helm", sub, words[1 + after :])
            if sub and sub[0] in HELM_READ:
                continue
            if sub and sub[0] in HELM_DRY_RUN:
                add_dry_run(simple, HELM_DRY_RUN[sub[0]], edits, plan)
                continue
            plan.problems.append(f"helm {' '.join(sub) or '(no subcommand)'} is not known to be read-only: not run (teach this test)")
        elif simple.name not in FILTERS:
            plan.problems.append(f"{simple.name} is not a filter this test knows to be harmless: not run")
    if tools == 0:
        plan.problems.append("runs neither kubectl nor helm")
    for start, end, text in sorted(edits, reverse=True):
        line = line[:start] + text + line[end:]
    plan.command = line
    return plan


def add_dry_run(simple, flag, edits, plan):
    present = [w.text for w in simple.words if w.text.startswith("--dry-run")]
    if present:
        if present != [flag]:
            plan.problems.append(f"has {' '.join(present)}, not {flag}: not run")
        return
    end = simple.words[-1].end
    edits.append((end, end, " " + flag))


# --- running ------------------------------------------------------------------------------

# After the line: every stage's exit status, then the first's as the shell's.
EPILOGUE = '\n__s=("${PIPESTATUS[@]}"); echo "${__s[*]}" >"$RUNBOOKS_LIVE_STATUS"; exit "${__s[0]}"\n'


def known_limit(plan, stderr):
    """The e2e cluster's known limits: the command and its error text must both match."""
    if plan.first is None or plan.first[0] != "kubectl":
        return None
    _, sub, args = plan.first
    if sub and sub[0] == "top" and "Metrics API not available" in stderr:
        return "no metrics-server in e2e"
    resources = {p.split(".")[0] for a in args if not a.startswith("-") for p in a.split(",")}
    if (sub == ["get"] and resources & {"servicemonitor", "servicemonitors"}
            and re.search(r"the server doesn't have a resource type \"servicemonitors?\"", stderr)):
        return "no Prometheus operator CRDs in e2e"
    if (sub == ["logs"] and any(a in ("--previous", "-p", "--previous=true") for a in args)
            and re.search(r'previous terminated container "[^"]+" in pod "[^"]+" not found', stderr)):
        return "no previous terminated container"
    return None


def first_lines(text, n=5):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[:n] + ([f"… ({len(lines) - n} more lines)"] if len(lines) > n else [])


def run(plan, root, env, timeout, status_file):
    """(outcome, reason, detail lines): outcome ok, skip or fail."""
    if os.path.exists(status_file):
        os.unlink(status_file)
    process = subprocess.Popen(
        ["bash", "-c", plan.command + EPILOGUE], cwd=root, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return "fail", None, [f"timed out after {timeout} s"] + first_lines(stderr.decode(errors="replace"))
    stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
    said = first_lines(stderr) or first_lines(stdout)
    try:
        with open(status_file) as f:
            statuses = [int(s) for s in f.read().split()]
        os.unlink(status_file)
        if not statuses:
            raise ValueError("no status")
    except (OSError, ValueError):
        return "fail", None, [f"bash exited {process.returncode} before the line ended"] + said
    last = len(statuses) - 1
    first = statuses[0]
    if first != 0 and not (first == 141 and last > 0):
        reason = known_limit(plan, stderr)
        if reason:
            return "skip", reason, []
        return "fail", None, [f"{plan.stages[0]} exited {first}"] + said
    if len(statuses) != len(plan.stages):
        # Not the pipeline this test read: judged on the first stage alone.
        return "ok", None, [f"note: {len(statuses)} stages ran, {len(plan.stages)} read; later stages not judged"]
    for i, (name, status) in enumerate(zip(plan.stages, statuses)):
        if i == 0 or status == 0 or name in OPENERS or name == "(":
            continue
        if name in GREPS and status == 1:
            continue
        if status == 141 and i < last:
            continue
        return "fail", None, [f"stage {i + 1} ({name}) exited {status}"] + said
    return "ok", None, []


def helm_path(tmp):
    """A PATH whose `helm` is $PRESTOP_HELM, when set."""
    path = os.environ.get("PATH", "")
    helm = os.environ.get("PRESTOP_HELM")
    if not helm:
        return path
    wrapper = os.path.join(tmp, "helm")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec "$PRESTOP_HELM" "$@"\n')
    os.chmod(wrapper, 0o755)
    return tmp + os.pathsep + path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runbooks", help="docs/RUNBOOKS.md")
    parser.add_argument("--root", required=True, help="the repository (commands run there)")
    parser.add_argument("--method", required=True, choices=["kustomize", "helm"])
    parser.add_argument("--pod", help="a pod of the node DaemonSet in prestop-node (<pod>)")
    parser.add_argument("--ip", help="that pod's IP (<ip>)")
    parser.add_argument("--uid", help="a pod's uid (<uid>)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per command")
    parser.add_argument("--list", action="store_true", help="print what would run; run nothing")
    args = parser.parse_args()

    values = {"pod": args.pod, "ip": args.ip, "uid": args.uid}
    for name, value in values.items():
        if value is not None and not PLACEHOLDERS[name].match(value):
            parser.error(f"--{name} {value!r} does not look like a {name}")
    with open(args.runbooks) as f:
        found, problems = commands(f.read())

    ran = skipped = failed = 0
    for problem in problems:
        print(f"FAIL: {args.runbooks}: {problem}")
        failed += 1
    with tempfile.TemporaryDirectory(prefix="runbooks-live.") as tmp:
        env = dict(os.environ, PATH=helm_path(tmp), RUNBOOKS_LIVE_STATUS=os.path.join(tmp, "status"))
        section_shown = None
        for section, tag, line in found:
            if tag in ("kustomize", "helm") and tag != args.method:
                continue
            if args.list and section != section_shown:
                print(f"## {section}")
                section_shown = section
            if tag == "cert-manager":
                print(f"skip (cert-manager): {line}")
                skipped += 1
                continue
            plan = plan_line(section, line, values)
            if plan.problems:
                print(f"FAIL: {plan.command}")
                print(f"    ({section})")
                for problem in plan.problems:
                    print(f"    {problem}")
                failed += 1
                continue
            if args.list:
                print(f"run: {plan.command}")
                ran += 1
                continue
            outcome, reason, detail = run(plan, args.root, env, args.timeout, env["RUNBOOKS_LIVE_STATUS"])
            if outcome == "ok":
                print(f"ok: {plan.command}")
                ran += 1
            elif outcome == "skip":
                print(f"skip ({reason}): {plan.command}")
                skipped += 1
            else:
                print(f"FAIL: {plan.command}")
                print(f"    ({section})")
                failed += 1
            for d in detail:
                print(f"    {d}")
            sys.stdout.flush()
    if args.list:
        print(f"{ran} would run, {skipped} skipped, {failed} failed")
    else:
        print(f"{ran} ran, {skipped} skipped, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
