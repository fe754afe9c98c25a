//! Issue 17, class 2: what an expansion's value may do where a builtin or the shell
//! interprets it, and the positions that stay proven whatever the value.

use super::*;

/// Issue 17, class 2: an expansion's value is the attacker's wherever a builtin or the
/// shell interprets it. Each script was proven portable on the old `main`; each behaves
/// otherwise in dash or busybox for some value (checked by `shell_fix_differential`).
#[test]
fn expansion_values_are_attacker_chosen_in_builtin_operands() {
    let cases: &[(&str, &str)] = &[
        // X=- : bash fails (no OLDPWD), sh stays in / and empties it.
        ("cd \"$X\"; rm -rf ./*", "cd to an expansion"),
        ("cd \"$X/sub\" && rm -rf ./*", "cd to an expansion"),
        ("cd \"${X:-/data}\"", "cd to an expansion"),
        ("cd \"$(cat /dir)\"", "cd to an expansion"),
        // N=1\r: dash and busybox read 1, bash fails.
        (
            "[ \"$N\" -eq 1 ] && rm -rf /data/*",
            "a test integer operand",
        ),
        ("test 1 -lt \"$N\"", "a test integer operand"),
        ("[ \"${N:-0}\" -gt 0 ]", "a test integer operand"),
        ("[ \"$1\" -ne 0 ]", "a test integer operand"),
        ("test \"$OP\" x", "an operator from an expansion"),
        ("[ a \"$OP\" b ]", "an operator from an expansion"),
        ("[ ! \"$X\" = a ]", "an operator from an expansion"),
        // P=[^a]: a negation in bash and busybox, `^` or `a` in dash.
        ("printf '%s' \"${P%$Q}\"", "an expansion in a ${x%pattern}"),
        ("printf '%s' \"${P##$Q}\"", "an expansion in a ${x%pattern}"),
        ("printf '%s' \"${P%[^/]*}\"", "[^...] in a ${x%pattern}"),
        ("printf '%s' \"${P#[[.a.]]}\"", "[[.x.]]"),
        ("ls /data/[[=a=]]*", "[[.x.]]"),
        ("case a in $X) rm -rf /data/* ;; esac", "an unquoted $"),
        ("rm -rf $D/*", "an unquoted $D"),
        ("rm -rf /data/$(cat /name)", "an unquoted $"),
        ("for f in $L; do rm -f \"$f\"; done", "an unquoted $L"),
        ("export A=$X", "an unquoted $X"),
        // CODE=-1: 255 in bash, an error in dash and busybox; 256, +1, ` 1`, `--` too.
        ("exit \"$CODE\"", "exit with an expansion other than $?"),
        ("exit $((n + 1))", "exit with an expansion other than $?"),
        (
            "f() { return \"$R\"; }; f",
            "exit with an expansion other than $?",
        ),
        ("kill \"$PID\"", "kill of an expansion"),
        ("kill -TERM $(cat /run/pid)", "kill of an expansion"),
        ("wait \"$PID\"", "wait for anything but $!"),
        // X=a[$(cmd)] runs cmd in bash; X=1+1 is 2 in bash, an error in dash.
        ("printf '%d' $((X + 1))", "$X in $((...))"),
        ("printf '%d' $(($X + 1))", "$X in $((...))"),
        ("printf '%d' $((${X} + 1))", "$X in $((...))"),
        ("printf '%d' $((${X:-0} + 1))", "an expansion in $((...))"),
        ("printf '%d' $(($1 + 1))", "an expansion in $((...))"),
        (
            "printf '%d' \"$N\"",
            "printf %d of a maybe non-number from $N",
        ),
        // Owned integers: only when the first mention assigns a number unconditionally.
        ("i=$((i + 1))", "$i in $((...))"),
        ("[ \"$i\" -lt 3 ]; i=0", "from $i"),
        ("if true; then i=0; fi; [ \"$i\" -lt 3 ]", "from $i"),
        ("true && i=0; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0 | cat; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0 & [ \"$i\" -lt 3 ]", "from $i"),
        ("(i=0); [ \"$i\" -lt 3 ]", "from $i"),
        ("x=$(i=0); [ \"$i\" -lt 3 ]", "from $i"),
        ("f() { i=0; }; f; [ \"$i\" -lt 3 ]", "from $i"),
        ("for x in 1; do i=0; done; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; read -r i; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; i=$X; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; i=\"${X:-1}\"; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; for i in a; do :; done; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; unset i; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; : \"${i:=x}\"; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=0; trap 'i=x' TERM; [ \"$i\" -lt 3 ]", "from $i"),
        ("i=08; printf '%d' $((i))", "$i in $((...))"),
    ];
    assert_blocked_by(cases);
}

/// What stays proven: positions where every value means the same (checked with generated
/// values by `shell_fix_differential`), and variables the script owns as integers.
#[test]
fn expansion_values_are_attacker_chosen_safe_positions_stay_portable() {
    for script in [
        "cd \"/$X\" && pwd",
        "cd \"./$X\" && pwd",
        "cd /data/\"$X\"",
        "[ \"$X\" = a ]; [ -n \"$X\" ]; [ \"$X\" ]; test ! \"$X\"",
        "[ \"$X\" != \"$Y\" ] || exit 1",
        "rm -rf \"$D\"/* \"$D\"/sub",
        "printf '%s|%c\\n' \"$X\" \"$X\"",
        "set -- \"$X\"; printf '%s\\n' \"$#\"",
        "case \"$X\" in a*) exit 0 ;; *) exit $? ;; esac",
        "A=${X%\"$Y\"}; B=\"${X#/}\"; printf '%s %s' \"$A\" \"$B\"",
        "i=0; while [ \"$i\" -lt 3 ]; do i=$((i + 1)); done; printf '%d\\n' \"$i\"",
        "n=5; rm -rf /tmp/$n; exit $?",
        "sleep 1 & pid=$!; kill \"$!\"; wait $!",
        "A=\"$X\"; B=$X; export C=\"$X\"",
    ] {
        assert_eq!(blocker(script), None, "{script:?}");
    }
}
