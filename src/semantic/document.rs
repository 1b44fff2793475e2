//! What text of a memory is embedded: the subject's name with the body, as the LoCoMo paper's
//! dense retriever embeds a dialogue turn (`{speaker} said, "{text}"`). A memory body is written
//! about its subject without naming them ("Went to a support group on Friday." about Caroline), so
//! a question that names the person ("When did Caroline go to the support group?") finds it only
//! when the name is part of what was embedded. The query is embedded as it is.
//!
//! The form is recorded on every embedding generation (`embedding_generations.document_form`):
//! vectors of another form are not comparable, so a generation of another form does not serve
//! queries until `mesh-memory index rebuild` builds one of this form. The name is the subject's
//! display name when the revision is indexed; a later rename does not re-embed (prompts render
//! current labels, only the vector keeps the old name until a rebuild).

/// The document form of vectors written now (recorded on new generations).
pub const DOCUMENT_FORM: &str = "subject_said_v1";

/// The text embedded for a revision with `body` about the actor named `subject` (`None`: no
/// subject recorded, the body alone).
pub fn document_text(subject: Option<&str>, body: &str) -> String {
    match subject.map(str::trim).filter(|name| !name.is_empty()) {
        Some(name) => format!("{name} said, \"{body}\""),
        None => body.to_owned(),
    }
}

/// SQL for the subject's current display name of a revision aliased `r` (a scalar subquery), for
/// the statements that read revisions to embed.
#[macro_export]
macro_rules! subject_name_sql {
    () => {
        "(SELECT subject_actor.display_name FROM actors subject_actor WHERE subject_actor.id = r.subject_actor_id)"
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_named_when_there_is_one() {
        assert_eq!(
            document_text(Some("Caroline"), "Went to a support group."),
            "Caroline said, \"Went to a support group.\""
        );
        assert_eq!(document_text(None, "Went to a support group."), "Went to a support group.");
        assert_eq!(document_text(Some("  "), "x"), "x");
    }
}
