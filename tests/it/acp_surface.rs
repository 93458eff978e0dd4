//! The parts of the ACP v1 surface clients still send or newly read
//! (`docs/acp.md`): the removed `session/set_model` kept as an alias.

use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

#[test]
fn set_model_is_kept_as_an_alias_of_the_model_option() {
    let dir = TestDir::new();
    let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
    dir.write_config(&format!(
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {}\nmodels = [\"script\", \"fast\"]\n",
        serde_json::to_string(script.to_str().unwrap()).unwrap()
    ));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let (updates, response) = acp.request(
        "session/set_model",
        json!({"sessionId": session, "modelId": "demo/fast"}),
    );
    assert_eq!(response["result"], json!({}), "{response}");
    // The new options come before the response.
    let update = updates.last().unwrap();
    assert_eq!(
        update["params"]["update"]["sessionUpdate"], "config_option_update",
        "{update}"
    );
    let current: Vec<&Value> = update["params"]["update"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["category"] == "model")
        .map(|o| &o["currentValue"])
        .collect();
    assert_eq!(current, [&json!("demo/fast")]);
    assert_eq!(dir.show_session(&session)["session"]["model"], "fast");
    let (_, refused) = acp.request(
        "session/set_model",
        json!({"sessionId": session, "modelId": "demo/none"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("demo/none"),
        "{refused}"
    );
    acp.finish();
}
