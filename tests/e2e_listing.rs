//! Listing operations through the real binary: newest first, a page at a time with a cursor
//! that neither skips nor repeats, filtered by state, tool, principal and time; an agent sees
//! only its own; bad queries are refused; the same answer after a restart and after a kill -9
//! (the projection rebuilt).

mod common;

use common::{Server, TOKEN_A, TOKEN_B, charge};
use serde_json::{Value, json};

/// Every page of `query` (with `&cursor=` appended), as the ids in order.
async fn pages(server: &Server, token: &str, query: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/operations?{query}&cursor={c}"),
            None => format!("/v1/operations?{query}"),
        };
        let (s, page) = server.get(token, &path).await;
        assert_eq!(s, 200, "{page}");
        let ids: Vec<String> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["operation_id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(page["count"], ids.len());
        out.push(ids);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
        assert!(out.len() < 50, "the cursor never ends");
    }
}

async fn listing(server: &Server, token: &str, query: &str) -> Value {
    let (s, page) = server.get(token, &format!("/v1/operations?{query}")).await;
    assert_eq!(s, 200, "{page}");
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_are_listed_newest_first_a_page_at_a_time_and_only_to_who_may_see_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let mut b_ids = Vec::new();
    for i in 0..7 {
        let (s, c) = server
            .claim(TOKEN_B, &format!("list-b-{i}"), charge("w", "1", "c"))
            .await;
        assert_eq!(s, 201, "{c}");
        b_ids.push(c["operation_id"].as_str().expect("id").to_owned());
    }
    let (_, msg) = server
        .claim(
            TOKEN_A,
            "list-a-msg",
            json!({"tool": "messages.send", "holder": "w", "request": {"to": "+1", "text": "t"}}),
        )
        .await;
    let msg = msg["operation_id"].as_str().expect("id").to_owned();
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{msg}/unknown"),
            json!({"holder": "w"}),
        )
        .await;
    let (_, ticket) = server
        .claim(
            TOKEN_A,
            "list-a-ticket",
            json!({"tool": "tickets.create", "holder": "w", "request": {"project": "p", "title": "t"}}),
        )
        .await;
    let ticket = ticket["operation_id"].as_str().expect("id").to_owned();

    // The agent: its own seven, newest first, three pages of up to three, none twice.
    let agent_pages = pages(&server, TOKEN_B, "limit=3").await;
    assert_eq!(
        agent_pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [3, 3, 1]
    );
    let listed: Vec<String> = agent_pages.concat();
    let newest_first: Vec<String> = b_ids.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first, "newest first, each once");
    let page = listing(&server, TOKEN_B, "limit=100").await;
    let times: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["created_at"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    assert!(
        !page.to_string().contains("\"amount\":"),
        "no request values: {page}"
    );
    let (s, b) = server
        .get(TOKEN_B, "/v1/operations?principal=agent-a")
        .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{b}"
    );

    // An operator sees everyone's, and filters.
    let all: Vec<String> = pages(&server, TOKEN_A, "limit=4").await.concat();
    assert_eq!(all.len(), 9, "{all:?}");
    assert_eq!(all[0], ticket);
    let manual = listing(&server, TOKEN_A, "state=manual").await;
    assert_eq!(manual["items"].as_array().unwrap().len(), 1, "{manual}");
    assert_eq!(manual["items"][0]["operation_id"], msg.as_str());
    assert_eq!(manual["items"][0]["cause"], "holder_reported");
    let tickets = listing(&server, TOKEN_A, "tool=tickets.create").await;
    assert_eq!(tickets["items"][0]["operation_id"], ticket.as_str());
    assert_eq!(tickets["count"], 1);
    let of_b = pages(&server, TOKEN_A, "principal=agent-b&limit=5")
        .await
        .concat();
    assert_eq!(of_b, newest_first);
    let future = listing(&server, TOKEN_A, "since=2999-01-01").await;
    assert_eq!(
        (future["count"].as_u64(), &future["next_cursor"]),
        (Some(0), &Value::Null)
    );
    let past = listing(&server, TOKEN_A, "until=2000-01-01").await;
    assert_eq!(past["count"], 0);

    // Bad queries: a clear error, nothing listed.
    for bad in [
        "state=sleeping",
        "cursor=nonsense",
        "limit=0",
        "limit=1001",
        "since=yesterday",
        "colour=blue",
    ] {
        let (s, b) = server.get(TOKEN_A, &format!("/v1/operations?{bad}")).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (400, Some("invalid_query")),
            "{bad}: {b}"
        );
    }
    let (s, _) = server.get("not-a-token", "/v1/operations").await;
    assert_eq!(s, 401);

    // The same after a clean restart, and after a kill -9 (the projection rebuilt from the log).
    let server = server.kill9_and_restart();
    assert_eq!(pages(&server, TOKEN_A, "limit=4").await.concat(), all);
    let config = server.config.clone();
    server.stop();
    let server = Server::start_existing(tmp.path(), &config);
    assert_eq!(
        pages(&server, TOKEN_B, "limit=2").await.concat(),
        newest_first
    );
    server.stop();
}

/// `GET /v1/tools`: an agent sees the tools it may claim with their effective contracts; an
/// operator every declared tool; and an operator reads any principal's operation, an agent
/// only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_with_their_contracts_and_operators_read_any_operation() {
    use common::TOKEN_OPS;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let (s, b_tools) = server.get(TOKEN_B, "/v1/tools").await;
    assert_eq!(s, 200, "{b_tools}");
    assert_eq!(names(&b_tools), ["payments.charge", "tickets.create"]);
    assert_eq!(b_tools["count"], 2);
    let charge_terms = &b_tools["items"][0];
    assert_eq!(
        charge_terms,
        &json!({
            "name": "payments.charge", "class": "keyed", "loss": "high",
            "lease_ms": 30_000, "retention_ms": 48 * 3_600_000u64,
            "queryable": true, "accept_unknown_risk": false,
            "unknown_outcome": "recovery_asks", "compensation": null,
            "fingerprint_categories": ["amount", "recipient", "body", "other"],
            "required_fields": [], "may_claim": true,
        })
    );
    let tickets = &b_tools["items"][1];
    assert_eq!(
        tickets["unknown_outcome"], "operator",
        "keyed, no status query"
    );

    let (s, ops_tools) = server.get(TOKEN_OPS, "/v1/tools").await;
    assert_eq!(s, 200, "{ops_tools}");
    assert_eq!(
        names(&ops_tools),
        [
            "messages.send",
            "payments.charge",
            "search.lookup",
            "tickets.create"
        ]
    );
    for tool in ops_tools["items"].as_array().expect("items") {
        assert_eq!(tool["may_claim"], false, "no agent role: {tool}");
        if tool["name"] == "search.lookup" {
            assert_eq!(tool["unknown_outcome"], "not_recorded");
        }
    }
    let (s, b) = common::send(server.raw().get(format!("{}/v1/tools", server.base))).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );

    // An operator reads another principal's operation; another agent does not.
    let (_, c) = server
        .claim(TOKEN_B, "tools-b-1", charge("w", "1", "c"))
        .await;
    let path = format!("/v1/operations/{}", c["operation_id"].as_str().expect("id"));
    let (s, read) = server.get(TOKEN_OPS, &path).await;
    assert_eq!(
        (s, read["state"].as_str()),
        (200, Some("processing")),
        "{read}"
    );
    let (s, read) = server.get(TOKEN_A, &path).await;
    assert_eq!(s, 200, "agent-a is an operator too: {read}");
    let (_, own) = server
        .claim(TOKEN_A, "tools-a-1", charge("w", "1", "c"))
        .await;
    let path = format!(
        "/v1/operations/{}",
        own["operation_id"].as_str().expect("id")
    );
    let (s, read) = server.get(TOKEN_B, &path).await;
    assert_eq!(
        (s, read["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{read}"
    );
    server.stop();
}

/// `GET /v1/summary`: operations by state, overall and per tool, for an operator or auditor;
/// the same after a clean restart and after a kill -9 (the projection rebuilt from the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_counts_operations_by_state_and_tool_and_survives_restarts() {
    use common::TOKEN_OPS;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    for i in 0..5 {
        let (s, c) = server
            .claim(TOKEN_B, &format!("sum-b-{i}"), charge("w", "1", "c"))
            .await;
        assert_eq!(s, 201, "{c}");
        if i < 2 {
            let id = c["operation_id"].as_str().expect("id");
            let (s, done) = server.complete(TOKEN_B, id, "w", &format!("ch_{i}")).await;
            assert_eq!(s, 200, "{done}");
        }
    }
    // A replay, a conflict and a refused report count nothing new.
    server
        .claim(TOKEN_B, "sum-b-0", charge("w", "1", "c"))
        .await;
    server
        .claim(TOKEN_B, "sum-b-1", charge("w", "9", "c"))
        .await;
    let (_, m) = server
        .claim(
            TOKEN_A,
            "sum-a-msg",
            json!({"tool": "messages.send", "holder": "w", "request": {"to": "+1", "text": "t"}}),
        )
        .await;
    let id = m["operation_id"].as_str().expect("id");
    server
        .post(
            TOKEN_A,
            &format!("/v1/operations/{id}/unknown"),
            json!({"holder": "w"}),
        )
        .await;
    let expected = json!({
        "total": 6,
        "by_state": {"processing": 3, "completed": 2, "failed": 0, "outcome_unknown": 0,
                     "manual": 1, "released": 0, "expired": 0},
        "by_tool": {"messages.send": {"manual": 1},
                    "payments.charge": {"completed": 2, "processing": 3}},
    });
    let (s, summary) = server.get(TOKEN_OPS, "/v1/summary").await;
    assert_eq!((s, &summary), (200, &expected));
    let (s, refused) = server.get(TOKEN_B, "/v1/summary").await;
    assert_eq!(
        (s, refused["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "an agent does not count others' operations: {refused}"
    );

    let config = server.config.clone();
    server.stop();
    let server = Server::start_existing(tmp.path(), &config);
    let (_, summary) = server.get(TOKEN_OPS, "/v1/summary").await;
    assert_eq!(summary, expected, "after a clean restart");
    let server = server.kill9_and_restart();
    let (_, summary) = server.get(TOKEN_OPS, "/v1/summary").await;
    assert_eq!(summary, expected, "after kill -9: rebuilt from the log");
    server.stop();
}
