//! Runtime agents, actors and connector identities (tables `runtime_agents`, `actors`,
//! `connector_identities`).

use serde::{Deserialize, Serialize};

use super::{Store, StoreError};
use crate::ids::{ActorId, AgentId, IdentityId};

/// What kind of party an actor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "actor_kind", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum ActorKind {
    /// A person.
    Human,
    /// An AI agent (every runtime agent has one for its own outbound voice).
    Agent,
    /// A bot or integration.
    Service,
}

/// An actor as rendering needs it: stable id, current display name, and the first connector
/// external id, which prompts show as `Victor (id U123)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ActorSummary {
    /// Stable id.
    pub id: ActorId,
    /// Kind of party.
    pub kind: ActorKind,
    /// Current display name (mutable).
    pub display_name: String,
    /// The actor's earliest connector external id, if any.
    pub external_id: Option<String>,
}

impl ActorSummary {
    /// The label rendered into prompts and tool results: the display name plus a stable id, so
    /// two actors named alike stay distinguishable.
    pub fn label(&self) -> String {
        match &self.external_id {
            Some(external) => format!("{} (id {})", self.display_name, external),
            None => format!("{} (id {})", self.display_name, self.id),
        }
    }
}

pub(crate) fn validate_name(field: &'static str, name: &str) -> Result<String, StoreError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(StoreError::invalid(field, "must not be empty"));
    }
    if trimmed.chars().count() > 200 {
        return Err(StoreError::invalid(field, "must be at most 200 characters"));
    }
    if trimmed.contains('\0') {
        return Err(StoreError::invalid(field, "must not contain NUL characters"));
    }
    Ok(trimmed.to_owned())
}

impl Store {
    /// Creates an actor. Display names need not be unique: identity is the id.
    pub async fn create_actor(&self, kind: ActorKind, display_name: &str) -> Result<ActorId, StoreError> {
        let name = validate_name("display name", display_name)?;
        let id = ActorId::generate();
        sqlx::query("INSERT INTO actors (id, kind, display_name) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(kind)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(id)
    }

    /// Creates a runtime agent together with the agent actor that speaks for it.
    pub async fn create_runtime_agent(&self, name: &str) -> Result<AgentId, StoreError> {
        let name = validate_name("runtime agent name", name)?;
        let agent = AgentId::generate();
        let actor = ActorId::generate();
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO actors (id, kind, display_name) VALUES ($1, 'agent', $2)")
            .bind(actor)
            .bind(&name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO runtime_agents (id, name, actor_id) VALUES ($1, $2, $3)")
            .bind(agent)
            .bind(&name)
            .bind(actor)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::from_unique(e, || format!("runtime agent named {name:?}")))?;
        tx.commit().await?;
        Ok(agent)
    }

    /// Finds a runtime agent by name or id text (CLI convenience).
    pub async fn find_runtime_agent(&self, name_or_id: &str) -> Result<AgentId, StoreError> {
        let row: Option<(AgentId,)> =
            sqlx::query_as("SELECT id FROM runtime_agents WHERE name = $1 OR id::text = lower($1)")
                .bind(name_or_id.trim())
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| r.0)
            .ok_or_else(|| StoreError::invalid("runtime agent", format!("no runtime agent named {name_or_id:?}")))
    }

    /// The actor a runtime agent speaks as (outbound messages, never part of an audience).
    pub async fn agent_actor(&self, agent: AgentId) -> Result<ActorId, StoreError> {
        let row: Option<(ActorId,)> = sqlx::query_as("SELECT actor_id FROM runtime_agents WHERE id = $1")
            .bind(agent)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.0).ok_or(StoreError::UnknownReference { kind: AgentId::LABEL, id: agent.0 })
    }

    /// Binds a connector's external id (e.g. Slack `U123`) to an actor; unique per connector.
    pub async fn add_connector_identity(
        &self,
        actor: ActorId,
        connector: &str,
        external_id: &str,
    ) -> Result<IdentityId, StoreError> {
        let connector = validate_name("connector", connector)?;
        let external_id = validate_name("external id", external_id)?;
        let id = IdentityId::generate();
        sqlx::query("INSERT INTO connector_identities (id, connector, external_id, actor_id) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(&connector)
            .bind(&external_id)
            .bind(actor)
            .execute(&self.pool)
            .await
            .map_err(|e| StoreError::from_unique(e, || format!("{connector} identity {external_id:?}")))?;
        Ok(id)
    }

    /// Resolves an authenticated connector identity to its actor.
    pub async fn resolve_identity(
        &self,
        connector: &str,
        external_id: &str,
    ) -> Result<Option<(IdentityId, ActorId)>, StoreError> {
        Ok(sqlx::query_as("SELECT id, actor_id FROM connector_identities WHERE connector = $1 AND external_id = $2")
            .bind(connector)
            .bind(external_id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Changes an actor's display name. Memory bodies are untouched: labels are rendered from
    /// this row at assembly time.
    pub async fn rename_actor(&self, actor: ActorId, display_name: &str) -> Result<(), StoreError> {
        let name = validate_name("display name", display_name)?;
        let updated = sqlx::query("UPDATE actors SET display_name = $2, updated_at = now() WHERE id = $1")
            .bind(actor)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if updated == 0 {
            return Err(StoreError::UnknownReference { kind: ActorId::LABEL, id: actor.0 });
        }
        Ok(())
    }

    /// Current identity rows for the given actors, for rendering labels.
    pub async fn actor_summaries(&self, actors: &[ActorId]) -> Result<Vec<ActorSummary>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT a.id, a.kind, a.display_name,
                    (SELECT ci.external_id FROM connector_identities ci
                      WHERE ci.actor_id = a.id ORDER BY ci.created_at, ci.id LIMIT 1) AS external_id
               FROM actors a WHERE a.id = ANY($1)",
        )
        .bind(actors)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Finds an actor by connector external id, display name or id text (CLI convenience).
    /// An ambiguous display name is an error naming the candidates' ids.
    pub async fn find_actor(&self, text: &str) -> Result<ActorId, StoreError> {
        let rows: Vec<(ActorId, String)> = sqlx::query_as(
            "SELECT DISTINCT a.id, a.display_name FROM actors a
               LEFT JOIN connector_identities ci ON ci.actor_id = a.id
              WHERE a.id::text = lower($1) OR ci.external_id = $1 OR a.display_name = $1",
        )
        .bind(text.trim())
        .fetch_all(&self.pool)
        .await?;
        match rows.as_slice() {
            [(id, _)] => Ok(*id),
            [] => Err(StoreError::invalid("actor", format!("no actor matches {text:?}"))),
            many => Err(StoreError::invalid(
                "actor",
                format!(
                    "{text:?} is ambiguous ({} actors share it); use an external id or actor id: {}",
                    many.len(),
                    many.iter().map(|(id, _)| id.to_string()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

/// A runtime agent for pickers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AgentSummary {
    /// Agent id.
    pub id: AgentId,
    /// Unique name.
    pub name: String,
    /// Live entries it holds.
    #[cfg_attr(feature = "specta", specta(type = u32))] // a count: a plain TypeScript number
    pub live_entries: i64,
}

/// An actor for pickers, with the label prompts render for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ActorChoice {
    /// Actor id.
    pub id: ActorId,
    /// Person, agent or service.
    pub kind: ActorKind,
    /// `Name (id U123)`: distinct even when display names collide.
    pub label: String,
}

impl Store {
    /// Actors an operator may name as a proven audience of `agent`'s sources: everyone recorded
    /// in one of its conversations or who sent it a message (never the agent itself).
    pub async fn audience_candidates(&self, agent: AgentId) -> Result<Vec<ActorChoice>, StoreError> {
        let ids: Vec<ActorId> = sqlx::query_scalar(
            "SELECT cm.actor_id FROM conversation_memberships cm
               JOIN conversations c ON c.id = cm.conversation_id WHERE c.runtime_agent_id = $1
             UNION
             SELECT m.sender_actor_id FROM messages m WHERE m.runtime_agent_id = $1 AND m.direction = 'inbound'
             EXCEPT
             SELECT ra.actor_id FROM runtime_agents ra WHERE ra.id = $1",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?;
        self.actor_choices(&ids).await
    }

    /// Every runtime agent with its count of live entries, by name.
    pub async fn list_runtime_agents(&self) -> Result<Vec<AgentSummary>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT ra.id, ra.name,
                    (SELECT count(*) FROM memory_entries e WHERE e.runtime_agent_id = ra.id AND e.state = 'live')
                        AS live_entries
               FROM runtime_agents ra ORDER BY ra.name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Actors that are the subject of at least one revision of `agent` (or of any agent), for the
    /// subject filter, by label.
    pub async fn list_subjects(&self, agent: Option<AgentId>) -> Result<Vec<ActorChoice>, StoreError> {
        let ids: Vec<(ActorId,)> = sqlx::query_as(
            "SELECT DISTINCT r.subject_actor_id FROM memory_entries e
               JOIN memory_entry_revisions r ON r.id = e.current_revision_id
              WHERE r.subject_actor_id IS NOT NULL AND ($1::uuid IS NULL OR e.runtime_agent_id = $1)",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?;
        let ids: Vec<ActorId> = ids.into_iter().map(|r| r.0).collect();
        self.actor_choices(&ids).await
    }

    /// `ids` as picker choices, by label.
    async fn actor_choices(&self, ids: &[ActorId]) -> Result<Vec<ActorChoice>, StoreError> {
        let mut choices: Vec<ActorChoice> = self
            .actor_summaries(ids)
            .await?
            .into_iter()
            .map(|a| ActorChoice { id: a.id, kind: a.kind, label: a.label() })
            .collect();
        choices.sort_by(|a, b| a.label.cmp(&b.label));
        Ok(choices)
    }

    /// The labels of `actors` (`Victor (id U123)`) by [`ActorSummary::label`], the one
    /// renderer prompts, tool results, the CLI and the console all show.
    /// (A collected list, not an iterator: a borrowing iterator held across the await would make
    /// the console's command futures not `Send`.)
    pub(crate) async fn actor_labels(
        &self,
        actors: Vec<ActorId>,
    ) -> Result<std::collections::HashMap<ActorId, String>, StoreError> {
        let ids: Vec<ActorId> = actors.into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        if ids.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        Ok(self.actor_summaries(&ids).await?.into_iter().map(|a| (a.id, a.label())).collect())
    }
}
