//! Shell line analysis: any line, however deeply nested, is analyzed or
//! refused with a reason — never a crash or a stack overflow — and the same
//! line always gives the same answer.
//!
//! Input: either a line as is, or (first byte 0) a line built by repeating an
//! opening fragment and a closing one up to a few thousand times, so nesting
//! far past the analyzer's budget is reached at once.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use pincer::core::policy::shell::{ShellParseError, analyze};

#[derive(Arbitrary, Debug)]
struct Nested<'a> {
    prefix: &'a str,
    open: &'a str,
    middle: &'a str,
    close: &'a str,
    depth: u16,
    suffix: &'a str,
}

impl Nested<'_> {
    fn line(&self) -> String {
        let depth = usize::from(self.depth % 6000);
        let mut line = String::with_capacity(
            self.prefix.len() + depth * (self.open.len() + self.close.len()) + self.middle.len(),
        );
        line.push_str(self.prefix);
        for _ in 0..depth {
            line.push_str(self.open);
        }
        line.push_str(self.middle);
        for _ in 0..depth {
            line.push_str(self.close);
        }
        line.push_str(self.suffix);
        line
    }
}

fn check(line: &str) {
    let first = analyze(line);
    assert_eq!(first, analyze(line), "two analyses of one line differ");
    match first {
        Ok(parsed) => {
            assert!(!line.trim().is_empty(), "an empty line analyzed");
            for command in &parsed.commands {
                assert!(
                    !command.words.is_empty(),
                    "a command without words: {parsed:?}"
                );
            }
        }
        Err(ShellParseError(reason)) => assert!(!reason.is_empty(), "a refusal without a reason"),
    }
}

fuzz_target!(|data: &[u8]| {
    // brush-parser may panic on odd input; `analyze` catches that and refuses
    // the line, as in the server. libFuzzer's hook would abort first, so it
    // is replaced by a quiet one: a panic that escapes still fails the run.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    match data {
        [0, rest @ ..] => {
            if let Ok(nested) = Nested::arbitrary(&mut Unstructured::new(rest)) {
                let line = nested.line();
                if line.len() <= 1 << 20 {
                    check(&line);
                }
            }
        }
        _ => {
            if let Ok(line) = std::str::from_utf8(data) {
                check(line);
            }
        }
    }
});
