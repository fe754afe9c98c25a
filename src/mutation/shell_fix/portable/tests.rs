use super::*;

fn blocker(script: &str) -> Option<String> {
    check(script, false, false).err()
}

/// Every script is refused, and the reason names what blocked it; all failures at once.
fn assert_blocked_by(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for &(script, want) in cases {
        match blocker(script) {
            Some(found) if found.contains(want) => {}
            other => failures.push(format!("{script:?}: want {want:?}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Scripts proven portable: real preStop and command idioms.
#[test]
fn portable() {
    for script in [
        "",
        "true",
        "rm -rf /scratch/*",
        "rm -rf \"$DIR\"/*",
        "set -e; rm -rf /data/cache /data/tmp",
        "set -ex\nmv test /test-package/\necho 'Hello job-worker' > /test-package/test.txt\nsleep 360000000\n",
        "find /scratch -mindepth 1 -delete",
        "find /data -name '*.tmp' -exec rm -f {} +",
        "find /data -type f -exec rm {} \\;",
        "for f in /data/*.log; do [ -e \"$f\" ] && rm -- \"$f\"; done",
        "while IFS= read -r line; do printf '%s\\n' \"$line\"; done < /etc/hosts",
        "case \"$1\" in start) echo start ;; stop|halt) echo stop;; *) exit 2 ;; esac",
        "trap 'rm -rf /scratch/work' TERM INT\nsleep 5 & wait $!",
        "cat <<EOF > /scratch/conf\nname=$NAME\nhome=${HOME:-/root}\nEOF\n",
        "cat <<'EOF'\n$(not run) `nor this` ${x[0]}\nEOF",
        "cat <<-EOF\n\tindented $x\n\tEOF\necho done",
        "n=0; n=$((n + 1)); printf '%d' \"$((n * 2 / 3))\" >/dev/null",
        "cleanup() { rm -rf /scratch/work; }\ncleanup",
        "f() ( cd /data && rm -f ./*.lock )\nf || exit 1",
        "x=$(date +%s); y=`hostname`; printf '%s %s\\n' \"$x\" \"$y\"",
        "[ -d /data ] || mkdir -p /data; test -f /data/x && rm /data/x",
        "if [ \"$A\" = yes ]; then echo a; elif [ -n \"$B\" ]; then echo b; else echo c; fi",
        "until [ -f /tmp/ready ]; do sleep 1; done",
        "exec sleep infinity",
        "exec nginx -g 'daemon off;'",
        "sleep 2 && kill -TERM 1",
        "kill -s TERM $$; kill -15 1; sleep 1 & kill -0 \"$!\"",
        "printf '%s\\n' ${#PATH} \"${v%.*}\" \"${v##*/}\" \"${v#./}\" \"${v%%/*}\" \"${v:+set}\" \"${v-unset}\" \"${v:=x}\"",
        "ls /data 2>/dev/null | wc -l >&2; ls 2>&1 >/dev/null; cat 3<&0 <&3",
        "umask 022; cd /scratch && pwd",
        "ls /x > /dev/null 2>&1; printf '%d' $?",
        "env A=1 sh -c true; printenv HOME",
        "export A=1 B; unset C",
        "set -- a b; for x; do printf '%s\\n' \"$x\"; done",
        "! grep -q x /etc/hosts",
        "(cd /tmp; rm -f a) & wait",
        "{ echo a; echo b; } > /scratch/out 2>&1",
        "echo a # comment with $(declare) and [[ ]]\n# whole-line comment <<<",
        "x='a b'; set -f; echo done",
        "printf '%-10s|%5d|%x|%%\\n' a 3 255",
        "printf '%d %d %d %d %s\\n' $? $# ${#x} $((1 + 2)) \"$x\"",
        "printf '%s=%d\\n' a 1 b -2",
        "while :; do break; done",
        "while :; do ls | while read -r x; do break; done; break; done",
        "for i in 1 2; do (for j in 1; do break; done); continue; done",
        "~/bin/run --flag",
        "rm -rf ./.cache /data/.cache",
        "echo {} {x} a}b",
    ] {
        assert_eq!(blocker(script), None, "{script:?}");
    }
}

/// One case per blocked construct class; each is what today's `main` rewrote (or would
/// have) without looking.
#[test]
fn blocked() {
    let cases: &[(&str, &str)] = &[
        // The issue's example: busybox has no declare, W stays empty, rm -rf /*.
        ("declare -r W=/scratch/work; rm -rf \"$W\"/*", "declare"),
        ("typeset -i n=1", "typeset"),
        ("local x=1", "local"),
        ("f() { local x; }", "local"),
        ("shopt -s nullglob; rm -f /data/*.tmp", "shopt"),
        ("(( n++ ))", "(( ))"),
        ("[[ -v HOME ]] && echo set", "[[ ]]"),
        ("if [[ $x == y* ]]; then :; fi", "[[ ]]"),
        ("a=(1 2 3)", "arrays"),
        ("echo ${a[0]}", "arrays"),
        ("a[1]=x", "arrays"),
        ("read -a parts < f", "read -a"),
        ("read -d '' x", "read -d"),
        ("read -p 'ok? ' x", "read -p"),
        ("read", "read without"),
        ("cat <<< \"$x\"", "<<<"),
        ("for i in {1..5}; do :; done", "{a..b}"),
        ("mkdir -p /data/{a,b}", "{a,b}"),
        ("echo $'a\\tb'", "$'...'"),
        ("echo $\"hi\"", "$\"...\""),
        ("function cleanup { :; }", "function"),
        ("echo $UID", "$UID"),
        ("[ \"$EUID\" -eq 0 ]", "$EUID"),
        ("echo $BASH_VERSION", "$BASH_VERSION"),
        ("echo ${BASH_SOURCE}", "$BASH_SOURCE"),
        ("sleep $RANDOM", "$RANDOM"),
        ("echo $SECONDS", "$SECONDS"),
        ("echo ${PIPESTATUS}", "$PIPESTATUS"),
        ("echo $FUNCNAME", "$FUNCNAME"),
        ("echo $HOSTNAME", "$HOSTNAME"),
        ("set -o pipefail; a | b", "pipefail"),
        ("set -euo pipefail", "set -u"),
        ("set -u; rm -rf \"$D\"/*", "set -u"),
        ("ls &> /dev/null", "&>"),
        ("ls >& /dev/null", ">&file"),
        ("ls |& cat", "|&"),
        ("source /etc/profile", "source"),
        (". /etc/profile", "."),
        ("echo ${v:1}", "${var:offset}"),
        ("echo ${v:1:2}", "${var:offset}"),
        ("echo ${v/a/b} ", "${var/pat/rep}"),
        ("echo ${!name}", "${!var}"),
        ("echo ${v^^}", "${var^^}"),
        ("echo ${#a[@]}", "arrays"),
        ("diff <(ls a) <(ls b)", "process substitution"),
        ("tee >(cat)", "process substitution"),
        ("coproc cat", "coproc"),
        ("select x in a b; do :; done", "select"),
        ("mapfile lines < f", "mapfile"),
        ("readarray lines < f", "readarray"),
        ("trap 'echo x' ERR", "trap on ERR"),
        ("trap 'echo x' DEBUG", "trap on DEBUG"),
        ("trap 'rm -rf /scratch/*' EXIT; sleep 100", "EXIT"),
        ("trap \"rm -rf $D\" TERM", "expansion"),
        ("trap 'declare x' TERM", "declare"),
        ("echo -e 'a\\nb'", "echo"),
        ("echo -n x", "echo options"),
        ("echo 'a\\nb'", "backslash"),
        ("echo \"removing $D\"", "echo with an expansion"),
        ("exec {fd}> /tmp/x", "{fd}"),
        ("exec 10> /tmp/x", "fd numbers"),
        ("exec 3> /tmp/x", "a redirection or assignment on exec"),
        ("let n=1+2", "let"),
        ("type ls", "type"),
        ("command -v ls", "command"),
        ("alias ll='ls -l'", "alias"),
        ("eval \"$cmd\"", "eval"),
        ("x=declare; $x -r W", "a command name from an expansion"),
        (
            "$(echo true)x=1 2>/dev/null || true",
            "a command name from an expansion",
        ),
        ("rm -rf /data/.*", "leading ."),
        ("time sleep 1", "time"),
        ("echo $((2 ** 3))", "**"),
        ("echo $((i++))", "++"),
        ("echo $((a, b))", ","),
        ("echo $((x = 1))", "assignments"),
        ("echo $((10 / d))", "division by a variable"),
        ("echo $((010))", "octal"),
        ("echo $((99999999999999999999))", "beyond 64 bits"),
        ("echo $((9223372036854775808))", "beyond 64 bits"),
        ("echo $((16#ff))", "based"),
        ("echo ${x:?unset}", "${var:?}"),
        ("echo ${x?unset}", "${var?}"),
        ("echo $0", "$0"),
        ("echo $-", "$-"),
        ("echo $_", "$_"),
        ("x+=1", "+="),
        ("cd -", "cd options"),
        ("shift", "shift"),
        ("readonly X=1", "readonly"),
        (": > /data/log", "a redirection or assignment on :"),
        ("X=1 export Y", "a redirection or assignment on export"),
        ("f() { :; }; X=1 f", "an assignment before function f"),
        ("set -e; x=$(false; echo hi)", "set -e with several"),
        ("return 1", "return outside"),
        ("break", "break outside"),
        ("[ a == b ]", "test =="),
        ("[ -v X ]", "test -v"),
        ("[ a -a b ]", "test -a"),
        ("test a -nt b", "test -nt"),
        ("printf '%q' x", "printf %q"),
        ("printf '%b' x", "printf %b"),
        ("printf \"$fmt\" x", "non-literal format"),
        ("printf '\\e[1m'", "printf escapes"),
        ("cat > $f", "unquoted $"),
        ("cat > *.log", "glob in a redirection"),
        ("echo > /dev/tcp/host/80", "/dev/tcp"),
        ("x=~/a", "~ inside"),
        ("ls --dir=~/a", "~ inside"),
        ("case x in a) :;& b) :;; esac", ";&"),
        ("ls [^a]*", "[^...]"),
        ("echo \"unterminated", "unterminated"),
        ("if true; then", "empty"),
        ("cat <<EOF\nno end", "without its end"),
        ("echo `echo \\`date\\``", "backslashes inside"),
        ("f() { :; }; echo() { :; }", "a function named echo"),
        ("kill %1", "job specs"),
        ("kill -l", "kill -l"),
        ("wait -n", "wait options"),
        ("umask", "umask without"),
        ("ulimit -n 1024", "ulimit"),
        ("PPID=1", "assigning PPID"),
        ("for RANDOM in 1; do :; done", "assigning RANDOM"),
        ("set", "set without"),
        ("set -o vi", "set -o vi"),
        ("exit 300", "exit status"),
        ("exec echo hi", "exec of a builtin"),
        ("getopts ab opt", "getopts"),
        ("hash -r", "hash"),
        ("jobs", "jobs"),
        ("pushd /tmp", "pushd"),
        ("enable -n echo", "enable"),
        ("builtin echo x", "builtin"),
        ("echo $[1 + 2]", "$[...]"),
        ("cd ~-", "~+ and ~-"),
        ("e*o hi", "a glob as a command name"),
        ("printf '%s' \"${@:-x}\"", "special parameters"),
        ("printf '%s' ${#@}", "special parameters"),
        ("true & & true", "empty command"),
        ("| true", "empty command"),
        ("printf '%d\\n'", "printf %d of a maybe non-number"),
        ("printf '%d\\n' \"$n\"", "printf %d of a maybe non-number"),
        ("printf '%s %d\\n' a 1 b", "printf %d of a maybe non-number"),
        ("wait 1234", "wait for anything but $!"),
        ("ls ~nobody/x", "~user"),
        ("cd /x; printf '%d' $?", "$? after a failing cd"),
        ("cat < /in; rc=$?", "$? after a failing cd or redirection"),
        ("cd", "cd without a directory"),
        ("env | sort", "an env listing"),
        ("env -i A=1", "an env listing"),
        ("printenv", "an env listing"),
        ("cd /data && echo *", "echo with an expansion"),
        ("echo ~", "echo with an expansion"),
        ("printf *", "non-literal format"),
        ("[ -e /data/*.lock ]", "a glob in test"),
        ("cd $DIR", "cd with an unquoted"),
        ("cd /data/o*", "cd with an unquoted"),
        ("read -r x <&-", "closing a file descriptor"),
        ("printf x >&-", "closing a file descriptor"),
        (
            "for i in 1; do (break); done",
            "break or continue in a subshell",
        ),
        (
            "for i in 1; do x=$(continue); done",
            "break or continue in $(...)",
        ),
        (
            "while :; do true | break; done",
            "break or continue in a pipeline",
        ),
        (
            "while :; do break & done",
            "break or continue in the background",
        ),
    ];
    assert_blocked_by(cases);
}

#[test]
fn dollar_zero_known_when_named() {
    assert_eq!(check("printf '%s' \"$0\" \"$1\"", true, false), Ok(()));
    assert_eq!(
        check("x=$(a; b)", false, true).err().as_deref(),
        Some("set -e with several commands in $(...)")
    );
    assert_eq!(check("x=$(a; b)", false, false), Ok(()));
}

#[test]
fn invocations() {
    let script = |text, zero_known, errexit| Invocation::Script {
        text,
        zero_known,
        errexit,
    };
    let cases: &[(&[Option<&str>], Invocation)] = &[
        (&[Some("-c"), Some("s")], script("s", false, false)),
        (
            &[Some("-ec"), Some("s"), Some("x")],
            script("s", true, true),
        ),
        (
            &[Some("-x"), Some("-c"), Some("s")],
            script("s", false, false),
        ),
        (
            &[Some("-o"), Some("errexit"), Some("-c"), Some("s")],
            script("s", false, true),
        ),
        (
            &[Some("+e"), Some("-c"), Some("s")],
            script("s", false, false),
        ),
        (&[Some("-c"), None], Invocation::Unknown),
        (&[None, Some("-c"), Some("s")], Invocation::Unknown),
    ];
    for (args, want) in cases {
        assert_eq!(&invocation(args), want, "{args:?}");
    }
    let refused: &[(&[Option<&str>], &str)] = &[
        (
            &[Some("-o"), Some("pipefail"), Some("-c"), Some("s")],
            "pipefail",
        ),
        (
            &[Some("-euo"), Some("pipefail"), Some("-c"), Some("s")],
            "-u",
        ),
        (&[Some("-O"), Some("extglob"), Some("-c"), Some("s")], "-O"),
        (&[Some("-l"), Some("-c"), Some("s")], "-l"),
        (&[Some("--login"), Some("-c"), Some("s")], "--login"),
        (&[Some("--posix"), Some("-c"), Some("s")], "--posix"),
        (&[Some("-s")], "-s"),
        (&[Some("-i")], "-i"),
        (&[Some("run.sh")], "a script file"),
        (&[Some("-e"), Some("run.sh"), Some("-c")], "a script file"),
        (&[], "stdin"),
        (&[Some("-c")], "-c without a script"),
        (&[Some("--"), Some("run.sh")], "--"),
    ];
    for (args, want) in refused {
        match invocation(args) {
            Invocation::Refuse(what) if what.contains(want) => {}
            other => panic!("{args:?}: want {want:?}, got {other:?}"),
        }
    }
}

/// The webhook parses what users send: deep nesting is refused, not a stack overflow, and
/// a big script is parsed in linear time.
#[test]
fn hostile_sizes() {
    let deep_param = format!("{}x{}", "${a:-".repeat(100_000), "}".repeat(100_000));
    let deep_subst = format!("{}x{}", "$(".repeat(100_000), ")".repeat(100_000));
    let deep_group = format!("{}true{}", "{ ".repeat(100_000), "; }".repeat(100_000));
    let deep_quotes = "\"$(".repeat(50_000);
    let deep_arith = format!(
        "printf '%d' $(({}1{}))",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    for script in [deep_param, deep_subst, deep_group, deep_quotes] {
        assert!(blocker(&script).is_some());
    }
    assert_eq!(blocker(&deep_arith), None);
    let started = std::time::Instant::now();
    let mut big = String::new();
    for i in 0..20_000 {
        big.push_str(&format!(
            "f{i}() {{ rm -rf \"/data/{i}\"; }}\nX=1 ls /data/{i} | wc -l\n"
        ));
    }
    assert_eq!(blocker(&big), None);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Whatever a user sends, the parser answers (no panic, no slicing past the end).
    #[test]
    fn never_panics(script in "[$(){}\\[\\]'\"`\\\\;&|<>#=~*?!%:+,.@^0-9a-z \n\t-]{0,80}") {
        let _ = check(&script, false, false);
        let _ = check(&script, true, true);
    }
}

mod attacker_values;
mod errexit_redirection;
