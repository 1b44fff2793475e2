//! SECURITY DEFINER functions cannot be turned against the store (issue 52, finding 1).
//!
//! A definer function runs with its owner's rights. Anything it resolves in a schema the caller
//! controls (a temporary table, a function or trigger in `pg_temp`) runs caller-written code with
//! those rights: a member of `mesh_eraser` made itself superuser through the temporary table of
//! `mesh_operator_erase`. These tests read the catalogue, so a definer added later is covered or
//! fails by name:
//!
//! - [`no_security_definer_function_can_be_turned_against_the_store`]: for every definer and every
//!   role that may run it (EXECUTE grantees; for a trigger function, the product roles that may
//!   write its table), a fresh login of that role, granted TEMPORARY explicitly (the function must
//!   be safe by itself, whatever the database grants), fills `pg_temp` with hostile objects (tables
//!   named like every relation of the schema and every `pg_temp.<name>` a function body mentions,
//!   with row and statement triggers and a row-security policy running code that tries to make the
//!   caller superuser, give it roles and grants; functions named like every function of the
//!   schema), then runs the function with real arguments. Roles, memberships, grants and owners are
//!   compared before and after, and the hostile code must never have run under another identity.
//! - [`security_definer_functions_run_with_least_privilege`]: every definer is owned by
//!   `mesh_definer`, a role that cannot log in, holds no role attribute, no membership and no
//!   CREATE; its search path is pinned with `pg_temp` last; no function uses temporary tables; and
//!   the product's roles cannot create temporary objects at all.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::Utc;
use common::{login_role_with_password, test_db, Person, TestDb, World};
use mesh_memory::privacy::sharing::{create_request, NewSharingRequest};
use mesh_memory::store::{Direction, NewMemory, NewMessage, Restriction, SourceRef, Store, Topology};
use mesh_memory::{AgentId, ConversationId, EntryId, RevisionId};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};
use uuid::Uuid;

/// The product's group roles (migration 20261202002100 and later).
const PRODUCT_GROUPS: [&str; 4] = ["mesh_runtime", "mesh_operator", "mesh_console_reader", "mesh_eraser"];

/// The role that owns every SECURITY DEFINER function (migration 20261219100000).
const DEFINER_OWNER: &str = "mesh_definer";

/// Every SECURITY DEFINER function this file has an attack scenario for ([`Fixture::attack`]).
/// A definer in the catalogue that is not listed fails the escalation test by name.
const SCENARIOS: &[&str] = &[
    "memory_keep_source_evidence_unknown",
    "memory_lexical_statistics_after_truncate",
    "memory_lexical_statistics_fold",
    "memory_merge_text_pending_lists",
    "memory_review_source_evidence",
    "memory_searchable_after_embeddings",
    "memory_searchable_after_entries",
    "memory_searchable_after_generations",
    "memory_searchable_after_summary",
    "memory_summary_after_sources",
    "mesh_confirm_sharing_by_source_actor",
    "mesh_operator_approve_sharing",
    "mesh_operator_deny_sharing",
    "mesh_operator_erase",
    "mesh_operator_issue_access_token",
    "mesh_operator_revoke_access_token",
    "mesh_operator_revoke_grant",
];

const REASON: &str = "attack scenario of tests/definer_escalation.rs";

/// Run by each attacking session on connecting (as itself): fills its `pg_temp` with hostile
/// objects. The schema comes from the session setting `mesh_attack.schema`. Each escalation is
/// tried in its own block so one refusal does not stop the others; every run of the hostile code
/// under an identity other than the session's is appended to `mesh_attack.ran_as` (a session
/// setting: it needs no privilege and survives the definer's own settings being restored).
const ARM: &str = r#"
DO $arm$
DECLARE
    target_schema text := current_setting('mesh_attack.schema');
    target record;
    tables integer := 0;
    functions integer := 0;
    failed text[] := '{}';
BEGIN
    PERFORM set_config('mesh_attack.ran_as', '', false);

    CREATE FUNCTION pg_temp.mesh_hostile(origin text) RETURNS void LANGUAGE plpgsql AS $hostile$
    DECLARE
        me text := session_user;
        target_schema text := current_setting('mesh_attack.schema');
        attempt text;
    BEGIN
        IF current_user <> session_user THEN
            PERFORM set_config('mesh_attack.ran_as',
                               current_setting('mesh_attack.ran_as', true) || format('%s as %s; ', origin, current_user),
                               false);
        END IF;
        FOREACH attempt IN ARRAY ARRAY[
            format('ALTER ROLE %I SUPERUSER', me),
            format('ALTER ROLE %I CREATEROLE BYPASSRLS', me),
            format('ALTER ROLE %I CREATEDB REPLICATION', me),
            format('GRANT mesh_runtime TO %I', me),
            format('GRANT mesh_operator TO %I', me),
            format('GRANT mesh_console_reader TO %I', me),
            format('GRANT mesh_eraser TO %I', me),
            format('GRANT mesh_definer TO %I', me),
            format('GRANT pg_write_all_data TO %I', me),
            format('GRANT ALL ON TABLE %I.sharing_grants TO %I', target_schema, me),
            format('GRANT ALL ON ALL TABLES IN SCHEMA %I TO %I', target_schema, me),
            format('GRANT CREATE ON SCHEMA %I TO %I', target_schema, me),
            format('GRANT ALL ON DATABASE %I TO %I', current_database(), me)
        ] LOOP
            BEGIN
                EXECUTE attempt;
            EXCEPTION WHEN OTHERS THEN
                NULL;
            END;
        END LOOP;
    END
    $hostile$;

    CREATE FUNCTION pg_temp.mesh_hostile_trigger() RETURNS trigger LANGUAGE plpgsql AS $trigger$
    BEGIN
        PERFORM pg_temp.mesh_hostile(format('%s %s %s trigger on pg_temp.%s', TG_WHEN, TG_LEVEL, TG_OP, TG_TABLE_NAME));
        IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' THEN
            RETURN OLD;
        ELSIF TG_LEVEL = 'ROW' THEN
            RETURN NEW;
        END IF;
        RETURN NULL;
    END
    $trigger$;

    CREATE FUNCTION pg_temp.mesh_hostile_policy(relation text) RETURNS boolean LANGUAGE plpgsql AS $policy$
    BEGIN
        PERFORM pg_temp.mesh_hostile('row security policy on pg_temp.' || relation);
        RETURN true;
    END
    $policy$;

    -- Tables named like every relation of the schema (with its columns) and like every pg_temp
    -- relation a function body names (with the columns it declares there, when it does).
    FOR target IN
        WITH relations AS (
            SELECT c.relname::text AS name,
                   string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
                       AS columns
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
              LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             WHERE n.nspname = target_schema AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
             GROUP BY c.relname
        ), bodies AS (
            SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = target_schema
        ), mentioned AS (
            SELECT DISTINCT lower(m[1]) AS name
              FROM bodies b CROSS JOIN LATERAL regexp_matches(b.prosrc, 'pg_temp\.(\w+)', 'gi') AS m
            UNION
            SELECT DISTINCT lower(m[1])
              FROM bodies b
             CROSS JOIN LATERAL regexp_matches(b.prosrc, 'TEMP(?:ORARY)?\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:\w+\.)?(\w+)',
                                               'gi') AS m
        )
        SELECT r.name, r.columns FROM relations r
        UNION ALL
        SELECT m.name,
               (SELECT d[1] FROM bodies b
                 CROSS JOIN LATERAL regexp_match(b.prosrc, 'TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:pg_temp\.)?' || m.name
                                                           || '\s*\(([^()]*)\)', 'i') AS d
                 WHERE d IS NOT NULL LIMIT 1)
          FROM mentioned m
         WHERE m.name NOT IN (SELECT r.name FROM relations r)
    LOOP
        BEGIN
            EXECUTE format('CREATE TEMP TABLE %I (%s)', target.name, coalesce(target.columns, 'kind text, id uuid, body text'));
        EXCEPTION WHEN OTHERS THEN
            EXECUTE format('CREATE TEMP TABLE %I (kind text, id uuid, body text)', target.name);
        END;
        -- One row, so that a read of the table evaluates the policy below.
        EXECUTE format('INSERT INTO pg_temp.%I DEFAULT VALUES', target.name);
        EXECUTE format('GRANT ALL ON pg_temp.%I TO PUBLIC', target.name);
        EXECUTE format('ALTER TABLE pg_temp.%I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', target.name);
        EXECUTE format('CREATE POLICY hostile ON pg_temp.%I USING (pg_temp.mesh_hostile_policy(%L))
                        WITH CHECK (pg_temp.mesh_hostile_policy(%L))', target.name, target.name, target.name);
        EXECUTE format('CREATE TRIGGER hostile_before_row BEFORE INSERT OR UPDATE OR DELETE ON pg_temp.%I
                        FOR EACH ROW EXECUTE FUNCTION pg_temp.mesh_hostile_trigger()', target.name);
        EXECUTE format('CREATE TRIGGER hostile_after_row AFTER INSERT OR UPDATE OR DELETE ON pg_temp.%I
                        FOR EACH ROW EXECUTE FUNCTION pg_temp.mesh_hostile_trigger()', target.name);
        EXECUTE format('CREATE TRIGGER hostile_before_statement BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE
                        ON pg_temp.%I FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.mesh_hostile_trigger()', target.name);
        EXECUTE format('CREATE TRIGGER hostile_after_statement AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
                        ON pg_temp.%I FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.mesh_hostile_trigger()', target.name);
        tables := tables + 1;
    END LOOP;

    -- Functions named like every function of the schema (not an extension's), same arguments.
    FOR target IN
        SELECT p.proname::text AS name, pg_get_function_arguments(p.oid) AS arguments,
               pg_get_function_result(p.oid) AS result,
               p.proretset OR p.prorettype = 'void'::regtype
                   OR coalesce('o' = ANY (p.proargmodes) OR 't' = ANY (p.proargmodes) OR 'b' = ANY (p.proargmodes), false)
                   AS bare_return
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = target_schema AND p.prokind = 'f'
           AND NOT EXISTS (SELECT 1 FROM pg_depend d
                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        BEGIN
            EXECUTE format('CREATE FUNCTION pg_temp.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                           target.name, target.arguments, target.result,
                           format('BEGIN PERFORM pg_temp.mesh_hostile(%L); RETURN%s; END',
                                  'function pg_temp.' || target.name,
                                  CASE WHEN target.bare_return THEN '' ELSE ' NULL' END));
            functions := functions + 1;
        EXCEPTION WHEN OTHERS THEN
            failed := failed || target.name;
        END;
    END LOOP;

    PERFORM set_config('mesh_attack.armed',
                       format('%s tables, %s functions, not made: %s', tables, functions, failed), false);
END
$arm$
"#;

/// A SECURITY DEFINER function of the store's schema.
#[derive(Debug)]
struct Definer {
    name: String,
    signature: String,
}

/// The store's schema (where the migrations created everything).
async fn store_schema(pool: &PgPool) -> String {
    sqlx::query_scalar("SELECT current_schema()::text").fetch_one(pool).await.unwrap()
}

/// Every SECURITY DEFINER function of `schema`, by name.
async fn definer_catalogue(pool: &PgPool, schema: &str) -> Vec<Definer> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT p.proname::text, p.oid::regprocedure::text
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND p.prosecdef
          ORDER BY 1, 2",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().map(|(name, signature)| Definer { name, signature }).collect()
}

/// (definer, role) pairs from the catalogue: the grantees of EXECUTE (PUBLIC standing for every
/// product group; the owner and superusers skipped) and, for a trigger function, the product
/// groups that may write a table whose (non-internal) trigger runs it.
async fn callers(pool: &PgPool, schema: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "WITH definers AS (
             SELECT p.oid, p.proname::text AS proname, p.proowner, p.proacl,
                    p.prorettype = 'trigger'::regtype AS is_trigger
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = $1 AND p.prosecdef
         ), groups AS (
             SELECT g AS rolname FROM unnest($2::text[]) AS g WHERE EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = g)
         ), executors AS (
             SELECT d.proname, coalesce(r.rolname::text, g.rolname) AS rolname
               FROM definers d
              CROSS JOIN LATERAL aclexplode(coalesce(d.proacl, acldefault('f', d.proowner))) AS a
               LEFT JOIN pg_roles r ON r.oid = a.grantee
               LEFT JOIN groups g ON a.grantee = 0
              WHERE NOT d.is_trigger AND a.privilege_type = 'EXECUTE' AND a.grantee <> d.proowner
                AND (a.grantee = 0 OR NOT r.rolsuper)
         ), firers AS (
             SELECT d.proname, g.rolname
               FROM definers d
               JOIN pg_trigger t ON t.tgfoid = d.oid AND NOT t.tgisinternal
              CROSS JOIN groups g
              WHERE d.is_trigger
                AND (has_table_privilege(g.rolname, t.tgrelid, 'INSERT, UPDATE, DELETE, TRUNCATE')
                     OR has_any_column_privilege(g.rolname, t.tgrelid, 'INSERT, UPDATE'))
         )
         SELECT proname, rolname FROM executors WHERE rolname IS NOT NULL
         UNION
         SELECT proname, rolname FROM firers
         ORDER BY 1, 2",
    )
    .bind(schema)
    .bind(PRODUCT_GROUPS.map(String::from).to_vec())
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Everything an escalation could change, one line per fact: the attributes and memberships of
/// `watched` roles (only those: the cluster's roles are shared with concurrent tests, which
/// create and drop logins in the product groups all the time), and in this database the owners and
/// ACLs of the schema's relations, columns, functions, of every schema, of the database, default
/// ACLs, role settings, parameter ACLs, triggers, policies, rules, event triggers and extensions.
async fn privilege_snapshot(admin: &PgPool, schema: &str, watched: &[String]) -> BTreeSet<String> {
    let lines: Vec<String> = sqlx::query_scalar(
        "SELECT format('role %s: super=%s inherit=%s createrole=%s createdb=%s login=%s replication=%s bypassrls=%s',
                       rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls)
           FROM pg_roles WHERE rolname = ANY ($2)
         UNION ALL
         SELECT format('membership: %s in %s %s granted by %s', pg_get_userbyid(m.member), pg_get_userbyid(m.roleid),
                       to_jsonb(m) - 'oid' - 'member' - 'roleid' - 'grantor', pg_get_userbyid(m.grantor))
           FROM pg_auth_members m
          WHERE pg_get_userbyid(m.member) = ANY ($2)
             OR (pg_get_userbyid(m.roleid) = ANY ($2) AND pg_get_userbyid(m.roleid) <> ALL ($3))
         UNION ALL
         SELECT format('relation %s (%s): owner %s, acl %s, row security %s/%s', c.oid::regclass, c.relkind,
                       pg_get_userbyid(c.relowner), coalesce(c.relacl::text, 'default'), c.relrowsecurity,
                       c.relforcerowsecurity)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
         UNION ALL
         SELECT format('column %s.%s: acl %s', a.attrelid::regclass, a.attname, a.attacl)
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND a.attacl IS NOT NULL
         UNION ALL
         SELECT format('function %s: owner %s, definer %s, config %s, acl %s', p.oid::regprocedure,
                       pg_get_userbyid(p.proowner), p.prosecdef, p.proconfig, coalesce(p.proacl::text, 'default'))
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
         UNION ALL
         SELECT format('schema %s: owner %s, acl %s', n.nspname, pg_get_userbyid(n.nspowner),
                       coalesce(n.nspacl::text, 'default'))
           FROM pg_namespace n WHERE n.nspname !~ '^pg_(toast_)?temp_'
         UNION ALL
         SELECT format('database %s: owner %s, acl %s', d.datname, pg_get_userbyid(d.datdba),
                       coalesce(d.datacl::text, 'default'))
           FROM pg_database d WHERE d.datname = current_database()
         UNION ALL
         SELECT format('default acl of %s in %s for %s: %s', pg_get_userbyid(a.defaclrole), a.defaclnamespace::regnamespace,
                       a.defaclobjtype, a.defaclacl)
           FROM pg_default_acl a
         UNION ALL
         SELECT format('role setting of %s: %s', coalesce(pg_get_userbyid(nullif(s.setrole, 0)), 'every role'), s.setconfig)
           FROM pg_db_role_setting s
          WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
            AND (s.setrole = 0 OR pg_get_userbyid(s.setrole) = ANY ($2))
         UNION ALL
         SELECT format('parameter %s: acl %s', parname, paracl) FROM pg_parameter_acl
         UNION ALL
         SELECT format('trigger %s on %s: %s, enabled %s', t.tgname, t.tgrelid::regclass, t.tgfoid::regprocedure, t.tgenabled)
           FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1
         UNION ALL
         SELECT format('policy %s on %s: %s', p.polname, p.polrelid::regclass, pg_get_expr(p.polqual, p.polrelid))
           FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1
         UNION ALL
         SELECT format('rule %s on %s', r.rulename, r.ev_class::regclass)
           FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1
         UNION ALL
         SELECT format('event trigger %s: %s owned by %s', evtname, evtfoid::regprocedure, pg_get_userbyid(evtowner))
           FROM pg_event_trigger
         UNION ALL
         SELECT format('extension %s %s owned by %s', extname, extversion, pg_get_userbyid(extowner)) FROM pg_extension",
    )
    .bind(schema)
    .bind(watched)
    .bind(PRODUCT_GROUPS.map(String::from).to_vec())
    .fetch_all(admin)
    .await
    .unwrap();
    lines.into_iter().collect()
}

/// Calls of every definer of `schema` made in this session (flushed and pending counts; needs
/// `track_functions = all`, set for each attacking role).
async fn definer_calls(conn: &mut sqlx::PgConnection, schema: &str) -> BTreeMap<String, i64> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT p.proname::text,
                (coalesce(pg_stat_get_function_calls(p.oid), 0) + coalesce(pg_stat_get_xact_function_calls(p.oid), 0))::bigint
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND p.prosecdef",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    rows.into_iter().collect()
}

/// An argument of an attack's statement.
#[derive(Clone, Debug)]
enum Arg {
    Id(Uuid),
    Ids(Vec<Uuid>),
    Text(String),
}

/// What an attacking session does to reach a definer.
#[derive(Debug)]
enum Attack {
    /// Statements run in one transaction (deferred triggers fired before it commits), with the
    /// session's search path putting `pg_temp` first: the most hostile setting that still lets
    /// the calls resolve (functions are never looked up in `pg_temp`).
    Statements(Vec<(&'static str, Vec<Arg>)>),
    /// A remember, then a forget, through the store's API as the runtime does it (the session's
    /// search path puts `pg_temp` last, so the store's own statements reach the real tables and
    /// fire their triggers).
    RememberAndForget { agent: AgentId, conversation: ConversationId, speaker: (Uuid, Uuid) },
}

impl Attack {
    /// One statement: a call with its arguments.
    fn call(sql: &'static str, args: Vec<Arg>) -> Attack {
        Attack::Statements(vec![(sql, args)])
    }

    /// The attacking session's search path (see the variants).
    fn search_path(&self) -> &'static str {
        match self {
            Attack::Statements(_) => "pg_temp, public",
            Attack::RememberAndForget { .. } => "public, pg_temp",
        }
    }
}

/// The scene the attacks draw their real arguments from: Priya's private fact (told in her
/// direct conversation), a channel with Victor, a conversation of unknown topology.
struct Fixture {
    db: TestDb,
    world: World,
    priya: Person,
    victor: Person,
    dm_priya: ConversationId,
    channel: ConversationId,
    unproven: ConversationId,
}

impl Fixture {
    async fn new(db: TestDb) -> Fixture {
        let world = World::new(&db.store, "assistant").await;
        let priya = world.person("Priya", "U456").await;
        let victor = world.person("Victor", "U123").await;
        let dm_priya = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
        let channel = world.conversation("C-ENG", Topology::Channel, &[&priya, &victor]).await;
        let unproven = world.conversation("C-OLD", Topology::Unknown, &[&priya, &victor]).await;
        Fixture { db, world, priya, victor, dm_priya, channel, unproven }
    }

    /// A new fact of Priya's, told in her direct conversation.
    async fn priya_fact(&mut self) -> (EntryId, RevisionId) {
        let body = format!("Priya is interviewing at company {}.", Uuid::new_v4().simple());
        self.world.remember(self.dm_priya, &self.priya, Some(self.priya.actor), &body).await
    }

    /// An authenticated message of Priya's in her direct conversation, sent now.
    async fn priya_says(&self, body: &str) -> Uuid {
        self.db
            .store
            .record_message(NewMessage {
                agent: self.world.agent,
                conversation: self.dm_priya,
                direction: Direction::Inbound,
                sender: self.priya.actor,
                sender_identity: Some(self.priya.identity),
                body,
                sent_at: Utc::now(),
            })
            .await
            .unwrap()
            .0
    }

    /// A pending request, made as the runtime makes it, to share a new fact of Priya's with the
    /// channel.
    async fn pending_request(&mut self) -> Uuid {
        let (_, revision) = self.priya_fact().await;
        let via_message = self.priya_says("You can tell the engineering channel about it.").await;
        create_request(
            &self.db.store,
            NewSharingRequest {
                agent: self.world.agent,
                via_message: mesh_memory::MessageId(via_message),
                revision,
                target_conversation: self.channel,
                rationale: "Priya asked to tell the team.".into(),
            },
        )
        .await
        .unwrap()
        .0
    }

    /// The source of a new fact learned in the conversation of unknown topology: its evidence is
    /// unknown, waiting for an operator's review.
    async fn unknown_evidence_source(&mut self) -> Uuid {
        let (_, revision) =
            self.world.remember(self.unproven, &self.priya, Some(self.priya.actor), "Likes Rust.").await;
        sqlx::query_scalar("SELECT id FROM revision_sources WHERE revision_id = $1 AND evidence = 'unknown'")
            .bind(revision)
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// An MCP access token binding Priya in her direct conversation, inserted as data (issuing
    /// belongs to the operator layer and its tests).
    async fn access_token(&self) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO mcp_access_tokens (id, token_hash, runtime_agent_id, conversation_id, identity_id, label)
             VALUES (gen_random_uuid(), sha256(convert_to(gen_random_uuid()::text, 'UTF8')), $1, $2, $3, 'attack')
             RETURNING id",
        )
        .bind(self.world.agent)
        .bind(self.dm_priya)
        .bind(self.priya.identity)
        .fetch_one(&self.db.pool)
        .await
        .unwrap()
    }

    /// The scenario for `function`: fixture rows written as the table owner, and what the
    /// attacking session then does with them.
    async fn attack(&mut self, function: &str) -> Attack {
        match function {
            "mesh_confirm_sharing_by_source_actor" => {
                let request = self.pending_request().await;
                let confirmation = self.priya_says("Yes, share it.").await;
                Attack::call(
                    "SELECT mesh_confirm_sharing_by_source_actor($1, $2)",
                    vec![Arg::Id(request), Arg::Id(confirmation)],
                )
            }
            "mesh_operator_approve_sharing" => {
                let request = self.pending_request().await;
                Attack::call("SELECT mesh_operator_approve_sharing($1, $2)", vec![Arg::Id(request), reason()])
            }
            "mesh_operator_deny_sharing" => {
                let request = self.pending_request().await;
                Attack::call("SELECT mesh_operator_deny_sharing($1, $2)", vec![Arg::Id(request), reason()])
            }
            "mesh_operator_revoke_grant" => {
                let (_, revision) = self.priya_fact().await;
                let grant = common::grant(&self.db.pool, self.world.agent, revision, &[self.victor.actor], false).await;
                Attack::call("SELECT mesh_operator_revoke_grant($1, $2)", vec![Arg::Id(grant), reason()])
            }
            "mesh_operator_issue_access_token" => Attack::call(
                "SELECT mesh_operator_issue_access_token($1, sha256(convert_to($2, 'UTF8')), $3, $4, $5, 'attack', NULL, $6)",
                vec![
                    Arg::Id(Uuid::now_v7()),
                    Arg::Text(format!("mmt_{}", Uuid::new_v4().simple())),
                    Arg::Id(self.world.agent.0),
                    Arg::Id(self.dm_priya.0),
                    Arg::Id(self.priya.identity.0),
                    reason(),
                ],
            ),
            "mesh_operator_revoke_access_token" => {
                let token = self.access_token().await;
                Attack::call("SELECT mesh_operator_revoke_access_token($1, $2)", vec![Arg::Id(token), reason()])
            }
            "memory_review_source_evidence" => {
                let source = self.unknown_evidence_source().await;
                Attack::call(
                    "SELECT memory_review_source_evidence($1, $2, $3)",
                    vec![Arg::Id(source), Arg::Ids(vec![self.priya.actor.0, self.victor.actor.0]), reason()],
                )
            }
            "memory_keep_source_evidence_unknown" => {
                let source = self.unknown_evidence_source().await;
                Attack::call("SELECT memory_keep_source_evidence_unknown($1, $2)", vec![Arg::Id(source), reason()])
            }
            "mesh_operator_erase" => {
                let (entry, _) = self.priya_fact().await;
                let previewed: Vec<Uuid> =
                    sqlx::query_scalar("SELECT DISTINCT id FROM memory_erasure_scope('entry', $1, NULL)")
                        .bind(entry)
                        .fetch_all(&self.db.pool)
                        .await
                        .unwrap();
                Attack::call(
                    "SELECT mesh_operator_erase($1, 'entry', $2, NULL, $3, $4, '{}')",
                    vec![Arg::Id(Uuid::new_v4()), Arg::Id(entry.0), reason(), Arg::Ids(previewed)],
                )
            }
            "memory_lexical_statistics_fold" => {
                // A remember leaves statistics pending; the fold takes them.
                self.priya_fact().await;
                Attack::call("SELECT memory_lexical_statistics_fold()", vec![])
            }
            "memory_merge_text_pending_lists" => {
                self.priya_fact().await;
                Attack::call("SELECT memory_merge_text_pending_lists(true)", vec![])
            }
            "memory_searchable_after_entries" | "memory_summary_after_sources" | "memory_searchable_after_summary" => {
                Attack::RememberAndForget {
                    agent: self.world.agent,
                    conversation: self.dm_priya,
                    speaker: (self.priya.actor.0, self.priya.identity.0),
                }
            }
            "memory_searchable_after_embeddings" => {
                let (_, revision) = self.priya_fact().await;
                sqlx::query(
                    "INSERT INTO embedding_generations (provider, model, dimension, state, activated_at, document_form)
                     SELECT 'attack', 'attack-model', 3, 'active', now(), 'attack'
                      WHERE NOT EXISTS (SELECT 1 FROM embedding_generations WHERE state = 'active')",
                )
                .execute(&self.db.pool)
                .await
                .unwrap();
                Attack::call(
                    "INSERT INTO public.revision_embeddings (generation_id, revision_id, model, dimension, embedding)
                     SELECT g.id, $1, g.model, g.dimension, array_fill(0.5::real, ARRAY[g.dimension])::public.vector
                       FROM public.embedding_generations g WHERE g.state = 'active'",
                    vec![Arg::Id(revision.0)],
                )
            }
            "memory_searchable_after_generations" => Attack::Statements(vec![
                (
                    "UPDATE public.embedding_generations SET state = 'retired', retired_at = now() WHERE state = 'active'",
                    vec![],
                ),
                (
                    "INSERT INTO public.embedding_generations (provider, model, dimension, state, activated_at, document_form)
                     VALUES ('attack', 'attack-activated', 3, 'active', now(), 'attack')",
                    vec![],
                ),
            ]),
            "memory_lexical_statistics_after_truncate" => {
                Attack::call("TRUNCATE public.searchable_revisions", vec![])
            }
            other => panic!("add an attack scenario for SECURITY DEFINER function {other} (SCENARIOS lists it)"),
        }
    }
}

fn reason() -> Arg {
    Arg::Text(REASON.into())
}

/// What one attack did.
struct Outcome {
    /// The function's own error, if any (a refusal is fine: the hostile objects were in place).
    error: Option<String>,
    /// Every run of hostile code under another identity.
    ran_as: String,
    /// The definers that ran during the attack.
    executed: Vec<String>,
    /// Lines of the privilege snapshot that went (`-`) or came (`+`).
    changes: Vec<String>,
    /// What the session armed.
    armed: String,
}

/// Runs `attack` as a fresh login in `group`, armed with hostile objects, and compares the
/// privilege snapshot around it. The login is dropped afterwards.
async fn run_attack(db: &TestDb, schema: &str, group: &str, attack: Attack) -> Outcome {
    let (role, password, pool) = login_role_with_password(db, "mm_attack", group).await;
    pool.close().await;
    // TEMPORARY granted to the login itself: the function must be safe even where temporary
    // objects are allowed. Function statistics show which definers the attack reached.
    let statements: Vec<String> = sqlx::query_scalar(
        "SELECT unnest(ARRAY[format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), $1),
                             format('ALTER ROLE %I IN DATABASE %I SET track_functions = ''all''', $1, current_database())])",
    )
    .bind(&role)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
    }

    let (arm_schema, search_path) = (schema.to_owned(), attack.search_path());
    let attacker = PgPoolOptions::new()
        .max_connections(1)
        .after_connect(move |conn, _| {
            let schema = arm_schema.clone();
            Box::pin(async move {
                sqlx::query("SELECT set_config('mesh_attack.schema', $1, false), set_config('stats_fetch_consistency', 'none', false)")
                    .bind(schema)
                    .execute(&mut *conn)
                    .await?;
                sqlx::raw_sql(ARM).execute(&mut *conn).await?;
                sqlx::query("SELECT set_config('search_path', $1, false)").bind(search_path).execute(&mut *conn).await?;
                Ok(())
            })
        })
        .connect_with(mesh_memory::database::with_session_settings(
            db.options.clone().username(&role).password(&password),
        ))
        .await
        .expect("the attacking login connects and arms");

    let admin_role: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&db.pool).await.unwrap();
    let mut watched: Vec<String> = PRODUCT_GROUPS.map(String::from).to_vec();
    watched.extend([DEFINER_OWNER.to_owned(), admin_role, role.clone()]);

    let armed: String = sqlx::query_scalar("SELECT current_setting('mesh_attack.armed')")
        .fetch_one(&attacker)
        .await
        .expect("the session is armed");
    let calls_before = definer_calls(&mut attacker.acquire().await.unwrap(), schema).await;
    let before = privilege_snapshot(&db.pool, schema, &watched).await;

    let error = launch(&attacker, attack).await.err();

    let after = privilege_snapshot(&db.pool, schema, &watched).await;
    let mut conn = attacker.acquire().await.unwrap();
    let calls_after = definer_calls(&mut conn, schema).await;
    let ran_as: String =
        sqlx::query_scalar("SELECT current_setting('mesh_attack.ran_as', true)").fetch_one(&mut *conn).await.unwrap();
    drop(conn);
    attacker.close().await;
    drop_login(db, &role).await;

    let executed = calls_after
        .iter()
        .filter(|(name, calls)| calls_before.get(*name).copied().unwrap_or(0) < **calls)
        .map(|(name, _)| name.clone())
        .collect();
    // Roles and memberships first: they say at once whether the caller escalated.
    let mut changes: Vec<String> = before
        .difference(&after)
        .map(|line| format!("- {line}"))
        .chain(after.difference(&before).map(|line| format!("+ {line}")))
        .collect();
    changes.sort_by_key(|line| (!line[2..].starts_with("role ") as u8, !line[2..].starts_with("membership") as u8));
    Outcome { error, ran_as, executed, changes, armed }
}

/// Performs the attack on the armed session; the function's own error comes back as text.
async fn launch(attacker: &PgPool, attack: Attack) -> Result<(), String> {
    match attack {
        Attack::Statements(statements) => {
            let mut conn = attacker.acquire().await.map_err(|e| e.to_string())?;
            let mut tx = conn.begin().await.map_err(|e| e.to_string())?;
            for (sql, args) in statements {
                let mut query = sqlx::query(sql);
                for arg in args {
                    query = match arg {
                        Arg::Id(id) => query.bind(id),
                        Arg::Ids(ids) => query.bind(ids),
                        Arg::Text(text) => query.bind(text),
                    };
                }
                if let Err(error) = query.execute(&mut *tx).await {
                    let _ = tx.rollback().await;
                    return Err(error.to_string());
                }
            }
            // Deferred constraint triggers run now, inside the attacking transaction.
            if let Err(error) = sqlx::query("SET CONSTRAINTS ALL IMMEDIATE").execute(&mut *tx).await {
                let _ = tx.rollback().await;
                return Err(error.to_string());
            }
            tx.commit().await.map_err(|e| e.to_string())
        }
        Attack::RememberAndForget { agent, conversation, speaker: (actor, identity) } => {
            let store = Store::new(attacker.clone());
            let body = format!("Priya's badge number is {}.", Uuid::new_v4().simple());
            let message = store
                .record_message(NewMessage {
                    agent,
                    conversation,
                    direction: Direction::Inbound,
                    sender: mesh_memory::ActorId(actor),
                    sender_identity: Some(mesh_memory::IdentityId(identity)),
                    body: &body,
                    sent_at: Utc::now(),
                })
                .await
                .map_err(|e| e.to_string())?;
            let written = store
                .create_entry(NewMemory {
                    agent,
                    body: body.clone(),
                    subject: Some(mesh_memory::ActorId(actor)),
                    source_actor: Some(mesh_memory::ActorId(actor)),
                    origin_conversation: Some(conversation),
                    always_on: false,
                    restriction: Restriction::None,
                    sources: vec![SourceRef::Message(message)],
                })
                .await
                .map_err(|e| e.to_string())?;
            store.forget_entry(agent, written.entry_id()).await.map_err(|e| e.to_string())?;
            Ok(())
        }
    }
}

/// Drops an attacking login once its session has ended (its statistics are flushed by then, so
/// they cannot be counted in the next attack's session), with whatever it was granted here.
async fn drop_login(db: &TestDb, role: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = $1")
            .bind(role)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if sessions == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let statements: Vec<String> =
        sqlx::query_scalar("SELECT unnest(ARRAY[format('DROP OWNED BY %I', $1), format('DROP ROLE %I', $1)])")
            .bind(role)
            .fetch_all(&db.pool)
            .await
            .unwrap();
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
    }
}

/// The search path a function pins (`proconfig`), element by element, if it pins one.
fn pinned_search_path(config: &Option<Vec<String>>) -> Option<Vec<String>> {
    config.iter().flatten().find_map(|setting| {
        setting
            .strip_prefix("search_path=")
            .map(|path| path.split(',').map(|s| s.trim().trim_matches('"').to_owned()).collect())
    })
}

#[tokio::test]
async fn no_security_definer_function_can_be_turned_against_the_store() {
    let db = test_db().await;
    let schema = store_schema(&db.pool).await;
    let definers = definer_catalogue(&db.pool, &schema).await;
    assert!(!definers.is_empty(), "the catalogue lists SECURITY DEFINER functions");
    let unknown: Vec<&Definer> = definers.iter().filter(|d| !SCENARIOS.contains(&d.name.as_str())).collect();
    assert!(
        unknown.is_empty(),
        "{}",
        unknown
            .iter()
            .map(|d| format!("add an attack scenario for SECURITY DEFINER function {}", d.signature))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let pairs = callers(&db.pool, &schema).await;
    let mut fixture = Fixture::new(db).await;

    let mut failures = Vec::new();
    // definer -> "role (attacking f)" for every definer that ran during an attack.
    let mut reached: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (function, group) in &pairs {
        let attack = fixture.attack(function).await;
        let outcome = run_attack(&fixture.db, &schema, group, attack).await;
        eprintln!(
            "attack on {function} as a {group} login: armed {}; {}; definers run: {}",
            outcome.armed,
            outcome.error.as_deref().map_or("the call succeeded".into(), |e| format!("its error: {e}")),
            outcome.executed.join(", ")
        );
        for definer in &outcome.executed {
            reached.entry(definer.clone()).or_default().insert(format!("{group} (attacking {function})"));
        }
        if !outcome.executed.contains(function) {
            failures.push(format!(
                "{function} as {group}: the scenario did not run the function to its end (statistics count \
                 completed calls; {})",
                outcome.error.as_deref().unwrap_or("no error")
            ));
        }
        if !outcome.ran_as.is_empty() {
            let mut runs: Vec<&str> = Vec::new();
            for run in outcome.ran_as.split("; ").map(str::trim).filter(|r| !r.is_empty()) {
                if !runs.contains(&run) {
                    runs.push(run);
                }
            }
            failures.push(format!("{function} as {group}: hostile pg_temp code ran: {}", runs.join("; ")));
        }
        if !outcome.changes.is_empty() {
            const SHOWN: usize = 16;
            let more = outcome.changes.len().saturating_sub(SHOWN);
            failures.push(format!(
                "{function} as {group}: privileges changed:\n    {}{}",
                outcome.changes[..outcome.changes.len().min(SHOWN)].join("\n    "),
                if more > 0 { format!("\n    ... and {more} more") } else { String::new() }
            ));
        }
    }
    for definer in &definers {
        match reached.get(&definer.name) {
            Some(by) => {
                eprintln!("{} was attacked by {}", definer.signature, by.iter().cloned().collect::<Vec<_>>().join(", "))
            }
            None => eprintln!("{} is not reachable by any product role (no attack ran it)", definer.signature),
        }
    }
    assert!(failures.is_empty(), "SECURITY DEFINER functions turned against the store:\n{}", failures.join("\n"));
}

#[tokio::test]
async fn security_definer_functions_run_with_least_privilege() {
    let db = test_db().await;
    let schema = store_schema(&db.pool).await;
    let mut problems: Vec<String> = Vec::new();

    let foreign_owners: Vec<(String, String)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, pg_get_userbyid(p.proowner)::text
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND p.prosecdef AND pg_get_userbyid(p.proowner) <> $2
          ORDER BY 1",
    )
    .bind(&schema)
    .bind(DEFINER_OWNER)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    problems.extend(foreign_owners.iter().map(|(f, owner)| format!("{f} is owned by {owner}, not {DEFINER_OWNER}")));

    let attributes: Option<(bool, bool, bool, bool, bool, bool)> = sqlx::query_as(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication, rolcanlogin
           FROM pg_roles WHERE rolname = $1",
    )
    .bind(DEFINER_OWNER)
    .fetch_optional(&db.pool)
    .await
    .unwrap();
    match attributes {
        None => problems.push(format!("there is no role {DEFINER_OWNER}")),
        Some(attributes) => {
            let (superuser, createrole, createdb, bypassrls, replication, login) = attributes;
            for (held, name) in [
                (superuser, "SUPERUSER"),
                (createrole, "CREATEROLE"),
                (createdb, "CREATEDB"),
                (bypassrls, "BYPASSRLS"),
                (replication, "REPLICATION"),
                (login, "LOGIN"),
            ] {
                if held {
                    problems.push(format!("{DEFINER_OWNER} has {name}"));
                }
            }
            let memberships: Vec<String> = sqlx::query_scalar(
                "SELECT format('%s is a member of %s', pg_get_userbyid(m.member), pg_get_userbyid(m.roleid))
                   FROM pg_auth_members m
                  WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = $1)
                     OR m.roleid = (SELECT oid FROM pg_roles WHERE rolname = $1)",
            )
            .bind(DEFINER_OWNER)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            problems.extend(memberships);
            let creates: Vec<String> = sqlx::query_scalar(
                "SELECT format('%s may %s', $1, what) FROM (
                     SELECT 'CREATE in schema ' || nspname AS what FROM pg_namespace
                      WHERE nspname !~ '^pg_(toast|temp_|toast_temp_)' AND has_schema_privilege($1, oid, 'CREATE')
                     UNION ALL
                     SELECT 'CREATE on the database' WHERE has_database_privilege($1, current_database(), 'CREATE')
                     UNION ALL
                     SELECT 'create TEMPORARY objects' WHERE has_database_privilege($1, current_database(), 'TEMPORARY')
                 ) AS x",
            )
            .bind(DEFINER_OWNER)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            problems.extend(creates);
            let grant_options: Vec<String> = sqlx::query_scalar(
                "WITH acls AS (
                     SELECT c.oid::regclass::text AS object, c.relacl AS acl FROM pg_class c
                     UNION ALL SELECT p.oid::regprocedure::text, p.proacl FROM pg_proc p
                     UNION ALL SELECT 'schema ' || n.nspname, n.nspacl FROM pg_namespace n
                     UNION ALL SELECT 'database ' || d.datname, d.datacl FROM pg_database d WHERE d.datname = current_database()
                 )
                 SELECT format('%s may grant %s on %s to others', $1, a.privilege_type, acls.object)
                   FROM acls CROSS JOIN LATERAL aclexplode(acls.acl) AS a
                  WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) AND a.is_grantable",
            )
            .bind(DEFINER_OWNER)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            problems.extend(grant_options);
            let owned: Vec<String> = sqlx::query_scalar(
                "SELECT format('%s owns %s', $1, what) FROM (
                     SELECT 'relation ' || c.oid::regclass AS what FROM pg_class c
                      WHERE c.relowner = (SELECT oid FROM pg_roles WHERE rolname = $1)
                     UNION ALL
                     SELECT 'schema ' || n.nspname FROM pg_namespace n
                      WHERE n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = $1)
                     UNION ALL
                     SELECT 'type ' || t.oid::regtype FROM pg_type t
                      WHERE t.typowner = (SELECT oid FROM pg_roles WHERE rolname = $1)
                 ) AS x",
            )
            .bind(DEFINER_OWNER)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            problems.extend(owned);
        }
    }

    let configs: Vec<(String, Option<Vec<String>>, bool)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, p.proconfig,
                EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                         WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND p.prosecdef ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    for (function, config, public) in &configs {
        match pinned_search_path(config) {
            None => problems.push(format!("{function} does not pin its search_path")),
            Some(path)
                if path.first().map(String::as_str) != Some("pg_catalog")
                    || path.last().map(String::as_str) != Some("pg_temp") =>
            {
                problems.push(format!("{function} searches {} (pg_catalog first, pg_temp last)", path.join(", ")))
            }
            Some(_) => {}
        }
        if *public {
            problems.push(format!("{function} may be executed by PUBLIC"));
        }
    }

    // A plain function that sets its own search path and leaves pg_temp out has it searched first
    // for relations: called by a definer, it would read the caller's temporary tables.
    let plain: Vec<(String, Option<Vec<String>>)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, p.proconfig
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND NOT p.prosecdef AND p.proconfig IS NOT NULL ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    for (function, config) in &plain {
        if let Some(path) = pinned_search_path(config) {
            if path.last().map(String::as_str) != Some("pg_temp") {
                problems.push(format!("{function} searches {} (pg_temp must be named, last)", path.join(", ")));
            }
        }
    }

    // A plain function that a definer calls runs with the definer's rights too: no function of the
    // schema may use temporary tables (nor could the product's roles, which cannot create them).
    let temporaries: Vec<(String, bool)> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text, p.prosecdef
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1 AND p.prokind IN ('f', 'p')
            AND NOT EXISTS (SELECT 1 FROM pg_depend d
                             WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
            AND pg_get_functiondef(p.oid) ~* '(pg_temp\\.|\\mtemp(orary)?\\s+table)'
          ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    problems.extend(temporaries.iter().map(|(function, definer)| {
        format!("{}{function} uses a temporary table (pg_temp)", if *definer { "SECURITY DEFINER " } else { "" })
    }));

    // No product code path uses temporary tables (src/ has none), so no product role may create them.
    let group_rights: Vec<String> = sqlx::query_scalar(
        "SELECT format('%s may %s', g, what) FROM unnest($2::text[]) AS g
          CROSS JOIN LATERAL (
              SELECT 'CREATE in schema ' || $1 AS what WHERE has_schema_privilege(g, $1, 'CREATE')
              UNION ALL
              SELECT 'CREATE on the database' WHERE has_database_privilege(g, current_database(), 'CREATE')
              UNION ALL
              SELECT 'create TEMPORARY objects' WHERE has_database_privilege(g, current_database(), 'TEMPORARY')
          ) AS x
          WHERE EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = g)",
    )
    .bind(&schema)
    .bind(PRODUCT_GROUPS.map(String::from).to_vec())
    .fetch_all(&db.pool)
    .await
    .unwrap();
    problems.extend(group_rights);

    assert!(problems.is_empty(), "SECURITY DEFINER functions are not least-privileged:\n{}", problems.join("\n"));
}
