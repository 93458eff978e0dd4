//! Fitting the conversation into the model's context window.
//!
//! Tokens are counted by the model's [`Counter`] (its tokenizer where one
//! fits, else about four bytes per token; calibrated by what the provider
//! reports); an image counts `tokens::IMAGE_TOKENS` whatever its size. When the
//! conversation is too long, old tool outputs
//! are shortened first, oldest first, then the oldest exchanges are dropped —
//! always whole: an assistant turn that asked for tools goes with every result,
//! and the history sent always starts with a user message.
//!
//! A compacted conversation is sent from its last summary on
//! ([`since_compaction`]): the summary stands for everything before it.

use super::session::Message;
use super::tokens::Counter;
/// A shortened tool output keeps this many bytes of its head.
const SHORTENED_KEEP: usize = 512;

/// What the model is sent of a conversation: from its last compaction point
/// (the summary) on; all of it when it was never compacted.
pub fn since_compaction(mut messages: Vec<Message>) -> Vec<Message> {
    if let Some(last) = messages
        .iter()
        .rposition(|m| matches!(m, Message::Summary { .. }))
    {
        messages.drain(..last);
    }
    messages
}

/// What fitting did, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fitted {
    pub shortened: usize,
    pub dropped: usize,
}

/// Shrinks `messages` until its estimate is at most `budget` tokens. The last
/// user message and everything after it are never dropped or shortened (the
/// current exchange); if even that does not fit, it is sent as it is and the
/// provider reports the context-length error in plain words.
pub fn fit(messages: &mut Vec<Message>, budget: usize, counter: &Counter) -> Fitted {
    let mut fitted = Fitted::default();
    let total = |m: &[Message]| counter.messages(m);
    if total(messages) <= budget {
        return fitted;
    }
    let current = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0);
    // 1. Shorten old tool outputs, oldest first.
    for index in 0..current {
        if total(messages) <= budget {
            return fitted;
        }
        if let Message::Tool { content, .. } = &mut messages[index]
            && content.len() > SHORTENED_KEEP * 2
        {
            let mut cut = SHORTENED_KEEP;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            let omitted = content.len() - cut;
            content.truncate(cut);
            content.push_str(&format!(
                "\n[... {omitted} bytes of this old tool output were dropped to fit the context window]"
            ));
            fitted.shortened += 1;
        }
    }
    // 2. Drop the oldest exchanges: from the start up to the next user message,
    //    so calls and their results leave together.
    let mut current = current;
    while total(messages) > budget && current > 0 {
        let next_user = messages[1..=current]
            .iter()
            .position(Message::is_user_side)
            .map_or(current, |p| p + 1);
        messages.drain(..next_user);
        fitted.dropped += next_user;
        current -= next_user;
    }
    fitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::{ContentPart, ToolCall};
    use crate::core::tokens::IMAGE_TOKENS;

    fn estimate(message: &Message) -> usize {
        Counter::bytes().message(message)
    }

    fn user(text: &str) -> Message {
        Message::User {
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    fn asks(id: &str) -> Message {
        Message::Assistant {
            text: String::new(),
            thought: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "x"}),
            }],
            interrupted: false,
        }
    }

    fn result(id: &str, bytes: usize) -> Message {
        Message::Tool {
            call_id: id.into(),
            content: "r".repeat(bytes),
            is_error: false,
        }
    }

    fn says(text: &str) -> Message {
        Message::Assistant {
            text: text.into(),
            thought: String::new(),
            tool_calls: Vec::new(),
            interrupted: false,
        }
    }

    fn conversation() -> Vec<Message> {
        vec![
            user("first"),
            asks("a"),
            result("a", 40_000),
            says("ok"),
            user("second"),
            asks("b"),
            result("b", 40_000),
            says("ok"),
            user("third"),
            asks("c"),
            result("c", 4_000),
        ]
    }

    #[test]
    fn an_image_costs_a_fixed_estimate_whatever_its_size() {
        let with_image = |data: &str| Message::User {
            content: vec![
                ContentPart::Text {
                    text: "look".into(),
                },
                ContentPart::Image {
                    mime_type: "image/png".into(),
                    data: data.into(),
                    uri: None,
                },
            ],
        };
        let small = estimate(&with_image("AAAA"));
        let large = estimate(&with_image(&"A".repeat(4_000_000)));
        assert_eq!(small, large);
        assert_eq!(small, estimate(&user("look")) + IMAGE_TOKENS);
    }

    #[test]
    fn a_conversation_that_fits_is_untouched() {
        let mut messages = conversation();
        assert_eq!(
            fit(&mut messages, 1_000_000, &Counter::bytes()),
            Fitted::default()
        );
        assert_eq!(messages, conversation());
    }

    #[test]
    fn old_tool_outputs_are_shortened_before_anything_is_dropped() {
        let mut messages = conversation();
        let fitted = fit(&mut messages, 3_000, &Counter::bytes());
        assert_eq!(
            fitted,
            Fitted {
                shortened: 2,
                dropped: 0
            }
        );
        assert_eq!(messages.len(), conversation().len());
        let Message::Tool { content, .. } = &messages[2] else {
            panic!()
        };
        assert!(
            content.ends_with("dropped to fit the context window]"),
            "{content}"
        );
        // The current exchange keeps its full output.
        assert_eq!(messages[10], result("c", 4_000));
    }

    #[test]
    fn then_the_oldest_exchanges_go_whole_never_splitting_a_call_from_its_result() {
        let mut messages = conversation();
        let fitted = fit(&mut messages, 1_100, &Counter::bytes());
        assert!(fitted.dropped > 0);
        assert!(matches!(messages[0], Message::User { .. }));
        // Every result still follows the assistant turn that asked for it.
        for (i, message) in messages.iter().enumerate() {
            if let Message::Tool { call_id, .. } = message {
                let asked = messages[..i].iter().any(|m| matches!(m, Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|c| &c.id == call_id)));
                assert!(asked, "orphan result {call_id}: {messages:#?}");
            }
        }
        assert_eq!(messages.last(), Some(&result("c", 4_000)));
        assert_eq!(messages[0], user("third"));
    }

    fn summary(text: &str, turns: usize) -> Message {
        Message::Summary {
            text: text.into(),
            turns,
        }
    }

    #[test]
    fn a_conversation_never_compacted_is_sent_whole() {
        assert_eq!(since_compaction(conversation()), conversation());
        assert_eq!(since_compaction(Vec::new()), Vec::<Message>::new());
    }

    #[test]
    fn a_compacted_conversation_is_sent_from_its_last_summary_on() {
        let mut messages = conversation();
        messages.push(says("done"));
        messages.push(user("/compact"));
        messages.push(summary("first summary", 4));
        messages.push(user("fourth"));
        messages.push(says("four"));
        messages.push(user("/compact"));
        messages.push(summary("second summary", 6));
        messages.push(user("fifth"));
        assert_eq!(
            since_compaction(messages),
            vec![summary("second summary", 6), user("fifth")]
        );
    }

    #[test]
    fn fitting_drops_a_summary_like_the_oldest_user_message() {
        // A summary is on the user's side: dropping the oldest exchange takes it
        // and leaves the conversation starting at the next user message.
        let mut messages = vec![
            summary(&"s".repeat(40_000), 3),
            says("ok"),
            user("next"),
            asks("a"),
            result("a", 100),
        ];
        let fitted = fit(&mut messages, 200, &Counter::bytes());
        assert_eq!(fitted.dropped, 2);
        assert_eq!(messages[0], user("next"));
        assert!(estimate(&summary("abcd", 1)) > estimate(&user("abcd")));
    }
}
