//! Who a query is about. "When did Caroline go to the support group?" asked by Melanie is about
//! Caroline: memories about the people a query names count as subject matches, not only memories
//! about the speaker ([`super::fusion::SubjectFocus`]).
//!
//! Names are resolved only among actors the destination audience may know of: its current members
//! and the subjects of eligible candidates. A name that appears only in a withheld memory is never
//! a candidate's subject here (withheld rows never reach Rust), so it cannot be resolved, and the
//! resolution cannot reveal it. A name matches by current display name (the whole name, or its
//! first word of three letters or more, as people are addressed) or by a connector id, as whole
//! words, ignoring case.

use std::collections::BTreeSet;

use crate::ids::ActorId;
use crate::store::{ActorSummary, Store, StoreError};

/// Words of `text`, lower-cased, split at anything not alphanumeric (`Caroline's` is `caroline`,
/// `s`).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Whether `phrase` (already split into words) occurs in `query` as consecutive whole words.
fn contains_phrase(query: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && query.windows(phrase.len()).any(|window| window == phrase)
}

/// Whether the query (its words) names `actor`.
pub(crate) fn names(query: &[String], actor: &ActorSummary) -> bool {
    let name = words(&actor.display_name);
    let first_name = name.first().filter(|w| w.chars().count() >= 3).cloned();
    contains_phrase(query, &name)
        || first_name.is_some_and(|first| query.contains(&first))
        || actor.external_id.as_deref().is_some_and(|id| contains_phrase(query, &words(id)))
}

/// The actors among `known` that `query` names, in id order; empty when it names none (or is
/// empty). One statement reads the current labels of `known`, only when the query has words.
pub(crate) async fn named_in_query(
    store: &Store,
    query: &str,
    known: impl IntoIterator<Item = ActorId>,
) -> Result<Vec<ActorSummary>, StoreError> {
    let query_words = words(query);
    if query_words.is_empty() {
        return Ok(Vec::new());
    }
    let known: Vec<ActorId> = known.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    if known.is_empty() {
        return Ok(Vec::new());
    }
    let mut named: Vec<ActorSummary> =
        store.actor_summaries(&known).await?.into_iter().filter(|a| names(&query_words, a)).collect();
    named.sort_by_key(|a| a.id);
    Ok(named)
}

/// The query without the words that name `named` people (their display-name words and connector
/// ids), for the full-text side: once a name is resolved to a person, memories *about* that person
/// are found by the subject match, and the name as a term would favour memories that merely address
/// or mention them. `None` when nothing would be left to search for, or nothing was removed.
pub(crate) fn without_names(query: &str, named: &[ActorSummary]) -> Option<String> {
    let name_words: BTreeSet<String> = named
        .iter()
        .flat_map(|a| words(&a.display_name).into_iter().chain(a.external_id.iter().flat_map(|id| words(id))))
        .collect();
    if name_words.is_empty() {
        return None;
    }
    let kept: Vec<String> = words(query).into_iter().filter(|w| !name_words.contains(w)).collect();
    (!kept.is_empty() && kept.len() < words(query).len()).then(|| kept.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ActorKind;

    fn actor(name: &str, external: Option<&str>) -> ActorSummary {
        ActorSummary {
            id: ActorId::generate(),
            kind: ActorKind::Human,
            display_name: name.into(),
            external_id: external.map(str::to_owned),
        }
    }

    #[test]
    fn names_match_whole_words_first_names_and_connector_ids() {
        let q = words("When did Caroline's sister visit Victor Hugo and u123?");
        assert!(names(&q, &actor("Caroline", None)), "possessive form");
        assert!(names(&q, &actor("Victor Hugo", None)), "full name");
        assert!(names(&q, &actor("Victor Lang", None)), "first name as addressed");
        assert!(names(&q, &actor("Someone", Some("U123"))), "connector id, any case");
        assert!(!names(&q, &actor("Carol", None)), "no partial words");
        assert!(!names(&q, &actor("Al Sister", None)), "a first name shorter than three letters needs the full name");
        assert!(!names(&words(""), &actor("Caroline", None)));
    }

    #[test]
    fn named_people_leave_the_full_text_query() {
        let caroline = actor("Caroline", Some("U7"));
        assert_eq!(
            without_names("When did Caroline's sister visit u7?", std::slice::from_ref(&caroline)).as_deref(),
            Some("when did s sister visit")
        );
        assert_eq!(without_names("Caroline?", std::slice::from_ref(&caroline)), None, "nothing else to search");
        assert_eq!(without_names("tabs or spaces", std::slice::from_ref(&caroline)), None, "nothing removed");
        assert_eq!(without_names("tabs or spaces", &[]), None);
    }
}
