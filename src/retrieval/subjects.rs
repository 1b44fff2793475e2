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

/// The destination's members a query names, resolved at most once per search and shared by the
/// full-text and semantic sides, which run at the same time: whichever asks first runs the one
/// statement, the other waits for its answer.
pub(crate) struct QueryNames<'a> {
    store: &'a Store,
    query: &'a str,
    audience: &'a [ActorId],
    members: tokio::sync::OnceCell<Vec<ActorSummary>>,
}

impl<'a> QueryNames<'a> {
    /// Names in `query` among `audience` (the destination's members), not yet resolved.
    pub(crate) fn new(store: &'a Store, query: &'a str, audience: &'a [ActorId]) -> Self {
        QueryNames { store, query, audience, members: tokio::sync::OnceCell::new() }
    }

    /// The members the query names ([`named_in_query`]), in id order.
    pub(crate) async fn members(&self) -> Result<&[ActorSummary], StoreError> {
        let members = self
            .members
            .get_or_try_init(|| named_in_query(self.store, self.query, self.audience.iter().copied()))
            .await?;
        Ok(members)
    }

    /// The text the full-text and semantic sources search: the query without the names of the
    /// members it names ([`without_names`]), else the query as asked.
    pub(crate) async fn searched_text(&self) -> Result<String, StoreError> {
        let members = self.members().await?;
        Ok(without_names(self.query, members).unwrap_or_else(|| self.query.to_owned()))
    }

    /// The members resolved so far (empty when no side has asked yet).
    pub(crate) fn resolved_members(&self) -> Vec<ActorSummary> {
        self.members.get().cloned().unwrap_or_default()
    }
}

/// The query without the words that name `named` people (their display-name words and connector
/// ids), for the full-text and semantic sides: once a name is resolved to a person, memories
/// *about* that person are found by the subject match, and the name as a term would favour
/// memories that merely address or mention them. On the semantic side the name would dominate
/// the similarity of short memories embedded with their speaker's name (`Name said, "..."`),
/// whatever they say (LoCoMo dev split, semantic-only recall@10 0.485 with the names, 0.629
/// without). `None` when nothing would be left to search for, or nothing was removed.
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
