//! Tool schemas and argument validation, property-tested: no extra field is ever accepted, no
//! input panics the validator, and the schemas agree with the validator on which fields exist.

use mesh_memory::tools::{tool_definitions, tool_names, validate_call, ToolCall, ToolError, ToolInvocation};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn call(name: &str, arguments: String) -> ToolCall {
    ToolCall { id: "c".into(), name: name.into(), arguments }
}

fn valid_arguments(tool: &str) -> Map<String, Value> {
    let id = uuid::Uuid::now_v7().to_string();
    let value = match tool {
        "remember" => json!({"body": "Prefers tabs.", "subject": "U123", "always_on": false}),
        "recall" => json!({"query": "tabs", "limit": 3}),
        "amend" => json!({"entry_id": id, "expected_revision": 1, "body": "Prefers spaces.", "subject": "U456"}),
        "forget" => json!({"entry_id": "5c06e1f2a9b3"}),
        "request_memory_sharing" => {
            json!({"entry_id": "5c06e1f2a9b3", "revision": 2, "rationale": "asked", "target_conversation": "C-ENG"})
        }
        other => panic!("unknown tool {other}"),
    };
    value.as_object().unwrap().clone()
}

#[test]
fn schema_properties_are_exactly_what_the_validator_accepts() {
    for (definition, name) in tool_definitions().iter().zip(tool_names()) {
        assert_eq!(definition["type"], "function");
        assert_eq!(definition["function"]["name"], name);
        let parameters = &definition["function"]["parameters"];
        assert_eq!(parameters["additionalProperties"], false);
        let mut schema_fields: Vec<String> = parameters["properties"].as_object().unwrap().keys().cloned().collect();
        let mut valid_fields: Vec<String> = valid_arguments(name).keys().cloned().collect();
        schema_fields.sort();
        valid_fields.sort();
        assert_eq!(schema_fields, valid_fields, "{name}");
        assert!(validate_call(&call(name, Value::Object(valid_arguments(name)).to_string())).is_ok(), "{name}");
    }
    let remember = &tool_definitions()[0]["function"]["parameters"]["properties"];
    for forbidden in ["entry_id", "revision_id", "expected_revision", "expected_revision_id", "supersedes", "supersede"]
    {
        assert!(remember.get(forbidden).is_none(), "remember must not offer {forbidden}");
    }
}

#[test]
fn remember_can_never_name_an_existing_entry() {
    let id = uuid::Uuid::now_v7().to_string();
    for field in [
        "entry_id",
        "revision_id",
        "revision",
        "expected_revision",
        "supersedes",
        "replaces",
        "source_actor",
        "audience",
    ] {
        let mut arguments = valid_arguments("remember");
        arguments.insert(field.to_owned(), json!(id));
        let error = validate_call(&call("remember", Value::Object(arguments).to_string())).unwrap_err();
        assert_eq!(error, ToolError::UnknownField { tool: "remember".into(), field: field.into() });
    }
}

proptest! {
    #[test]
    fn any_extra_field_is_rejected(tool in prop::sample::select(tool_names().to_vec()), field in "[a-z_]{1,20}") {
        let mut arguments = valid_arguments(tool);
        prop_assume!(!arguments.contains_key(&field));
        arguments.insert(field.clone(), json!(true));
        let result = validate_call(&call(tool, Value::Object(arguments).to_string()));
        let is_unknown_field = matches!(result, Err(ToolError::UnknownField { .. }));
        prop_assert!(is_unknown_field);
    }

    #[test]
    fn arbitrary_argument_text_never_panics(tool in prop::sample::select(tool_names().to_vec()), text in ".{0,200}") {
        if let Ok(invocation) = validate_call(&call(tool, text)) {
            prop_assert_eq!(invocation.name(), tool);
        }
    }

    #[test]
    fn over_long_bodies_are_rejected(extra in 1usize..50) {
        let body = "x".repeat(mesh_memory::store::MAX_BODY_CHARS + extra);
        let result = validate_call(&call("remember", json!({"body": body}).to_string()));
        let is_invalid = matches!(result, Err(ToolError::InvalidField { .. }));
        prop_assert!(is_invalid);
    }
}

#[test]
fn validated_remember_carries_no_authenticated_context() {
    let ToolInvocation::Remember(args) =
        validate_call(&call("remember", json!({"body": "Likes tea."}).to_string())).unwrap()
    else {
        panic!("remember")
    };
    // Only body, subject and always_on exist: source, conversation and audience come from the turn.
    assert_eq!(args.body, "Likes tea.");
    assert_eq!(args.subject, None);
    assert!(!args.always_on);
}
