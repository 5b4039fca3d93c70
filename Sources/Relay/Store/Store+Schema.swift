extension Store {
    /// Schema migrations: entry `n` takes the file from `user_version` n to n + 1. Only ever append; a shipped
    /// migration never changes, since files in the field have already run it.
    ///
    /// Tables are STRICT so a wrong-typed value is an error, not a silent conversion.
    static let migrations: [String] = [
        // v1: devices, their Live Activity tokens, and the pauses seen (`docs/architecture.md`, "The store").
        """
        CREATE TABLE devices (
            id TEXT PRIMARY KEY NOT NULL,
            token TEXT NOT NULL,
            start_token TEXT,
            environment TEXT NOT NULL CHECK (environment IN ('development', 'production')),
            server_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) STRICT;

        CREATE TABLE activities (
            device_id TEXT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
            run_id TEXT NOT NULL,
            token TEXT NOT NULL,
            PRIMARY KEY (device_id, run_id)
        ) STRICT;
        -- Ending a run's activities looks them up by run, across devices.
        CREATE INDEX activities_by_run ON activities (run_id);

        CREATE TABLE pauses (
            state_id TEXT PRIMARY KEY NOT NULL,
            run_id TEXT NOT NULL,
            state_name TEXT NOT NULL,
            paused_at INTEGER NOT NULL,
            timeout_at INTEGER,
            announced_at INTEGER,
            reminded_at INTEGER,
            ended_at INTEGER,
            ended_state TEXT
        ) STRICT;
        -- Every run-state event asks "is this run waiting?"; only waiting pauses are indexed for it.
        CREATE INDEX pauses_waiting_by_run ON pauses (run_id, paused_at) WHERE ended_at IS NULL;
        -- Pruning finds ended pauses by age.
        CREATE INDEX pauses_ended ON pauses (ended_at) WHERE ended_at IS NOT NULL;
        """,
        // v2: the WaitingProps an announce sent, so the end push (even after a restart) carries the same text.
        """
        ALTER TABLE pauses ADD COLUMN props TEXT;
        """,
        // v3: the durable outbox. A fan-out writes its body once (outbox_messages) and one small row per token
        // (outbox); a row lives until APNs has answered for it. Rows go with their device.
        """
        CREATE TABLE outbox_messages (
            id INTEGER PRIMARY KEY,
            state_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            purpose TEXT NOT NULL CHECK (purpose IN ('alert', 'start', 'reminder', 'end')),
            push_type TEXT NOT NULL CHECK (push_type IN ('alert', 'liveactivity')),
            topic TEXT NOT NULL,
            priority INTEGER NOT NULL,
            collapse_id TEXT,
            expires_at INTEGER NOT NULL,
            payload TEXT NOT NULL
        ) STRICT;
        CREATE INDEX outbox_messages_by_state ON outbox_messages (state_id);

        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY,
            message_id INTEGER NOT NULL REFERENCES outbox_messages (id) ON DELETE CASCADE,
            device_id TEXT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
            token TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            due_ms INTEGER NOT NULL DEFAULT 0,
            UNIQUE (message_id, token)
        ) STRICT;
        -- The drain reads due rows in order; deleting a device or a message finds its rows.
        CREATE INDEX outbox_due ON outbox (due_ms);
        CREATE INDEX outbox_by_device ON outbox (device_id);
        CREATE INDEX outbox_by_message ON outbox (message_id);
        """,
        // v4: which flows send their own context events around a pause (FlowHabits), so only theirs wait for one.
        """
        CREATE TABLE flow_habits (
            flow_id TEXT PRIMARY KEY NOT NULL,
            sends_context INTEGER NOT NULL CHECK (sends_context IN (0, 1)),
            updated_at INTEGER NOT NULL
        ) STRICT;
        """,
        // v5: the outbox's UNIQUE (message_id, token) index already finds a message's rows (its leftmost column),
        // so the separate one only cost every outbox insert and delete a B-tree write (~18% of a settle's deletes).
        """
        DROP INDEX outbox_by_message;
        """,
        // v6: a Live Activity update is a purpose of its own. A CHECK can't be altered, so the table is built anew
        // and its rows copied (foreign keys are off while migrating: dropping the old table must not cascade into
        // `outbox`, whose rows then refer to the new table by its name; `migrate` checks them after).
        """
        CREATE TABLE outbox_messages_v6 (
            id INTEGER PRIMARY KEY,
            state_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            purpose TEXT NOT NULL CHECK (purpose IN ('alert', 'start', 'reminder', 'end', 'update')),
            push_type TEXT NOT NULL CHECK (push_type IN ('alert', 'liveactivity')),
            topic TEXT NOT NULL,
            priority INTEGER NOT NULL,
            collapse_id TEXT,
            expires_at INTEGER NOT NULL,
            payload TEXT NOT NULL
        ) STRICT;
        INSERT INTO outbox_messages_v6 SELECT id, state_id, run_id, purpose, push_type, topic, priority, collapse_id,
            expires_at, payload FROM outbox_messages;
        DROP TABLE outbox_messages;
        ALTER TABLE outbox_messages_v6 RENAME TO outbox_messages;
        CREATE INDEX outbox_messages_by_state ON outbox_messages (state_id);
        """,
        // v7: when each push body was stored, for the oldest pending push's age (`/metrics`). Bodies already stored
        // count from the migration.
        """
        ALTER TABLE outbox_messages ADD COLUMN created_ms INTEGER NOT NULL DEFAULT 0;
        UPDATE outbox_messages SET created_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000;
        """,
        // v8: APNs' last answer for each waiting pause, device and purpose (`PushAnswer`), kept after the outbox row
        // goes so `prefect-push status` can say delivered when, or dropped why (deleted when the pause ends). No CHECK
        // on the purpose: a new purpose needs no rebuilt table. No index beyond the key: every answer writes a row, and only `status` reads by device.
        """
        CREATE TABLE push_answers (
            state_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            purpose TEXT NOT NULL,
            status INTEGER NOT NULL,
            reason TEXT NOT NULL,
            answered_ms INTEGER NOT NULL,
            PRIMARY KEY (state_id, device_id, purpose)
        ) STRICT, WITHOUT ROWID;
        """,
        // v9: no CHECK lists the push purposes or types any more: they are `PushPurpose` and `Push.Kind`, which alone
        // write them, so a new purpose is a new case there and no rebuilt table (as v6 had to for `update`). Built anew
        // as v6 was, for the last time.
        """
        CREATE TABLE outbox_messages_v9 (
            id INTEGER PRIMARY KEY,
            state_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            purpose TEXT NOT NULL,
            push_type TEXT NOT NULL,
            topic TEXT NOT NULL,
            priority INTEGER NOT NULL,
            collapse_id TEXT,
            expires_at INTEGER NOT NULL,
            payload TEXT NOT NULL,
            created_ms INTEGER NOT NULL DEFAULT 0
        ) STRICT;
        INSERT INTO outbox_messages_v9 SELECT id, state_id, run_id, purpose, push_type, topic, priority, collapse_id,
            expires_at, payload, created_ms FROM outbox_messages;
        DROP TABLE outbox_messages;
        ALTER TABLE outbox_messages_v9 RENAME TO outbox_messages;
        CREATE INDEX outbox_messages_by_state ON outbox_messages (state_id);
        """,
        // v10: a fan-out to the registry (an announce, a reminder) is written as its message and the rule that picks
        // its devices (`FanOutAudience`: audience, audience_server, audience_before), not as a row per device, so its
        // first push leaves once one row commits. `open` while its answers are being written; each answered token is
        // noted in fanout_sent (and, to be tried again, gets an outbox row); after a kill the members of an open
        // fan-out with no note become outbox rows (`reopenFanOuts`). A member is a token, as the live send dedupes
        // them: one token under two device ids is one push, under the first id. fanout_unanswered is the open
        // members with no note; pending_pushes every push not yet answered, rows and those alike, for `status` and
        // `/metrics`.
        """
        ALTER TABLE outbox_messages ADD COLUMN audience TEXT;
        ALTER TABLE outbox_messages ADD COLUMN audience_server TEXT;
        ALTER TABLE outbox_messages ADD COLUMN audience_before INTEGER;
        ALTER TABLE outbox_messages ADD COLUMN open INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE fanout_sent (
            message_id INTEGER NOT NULL,
            token TEXT NOT NULL,
            PRIMARY KEY (message_id, token)
        ) STRICT, WITHOUT ROWID;
        CREATE VIEW fanout_members AS
            SELECT m.id AS message_id, min(d.id) AS device_id,
                   CASE m.audience WHEN 'start_token' THEN d.start_token ELSE d.token END AS token
            FROM outbox_messages m JOIN devices d
                ON d.server_id = m.audience_server AND d.created_at <= m.audience_before
            WHERE m.open = 1 AND (m.audience = 'token' OR d.start_token IS NOT NULL)
            GROUP BY m.id, token;
        CREATE VIEW fanout_unanswered AS
            SELECT f.message_id, f.device_id, f.token FROM fanout_members f
            WHERE NOT EXISTS (SELECT 1 FROM fanout_sent s WHERE s.message_id = f.message_id AND s.token = f.token);
        CREATE VIEW pending_pushes AS
            SELECT o.message_id, o.device_id, o.attempts, o.due_ms FROM outbox o
            UNION ALL
            SELECT f.message_id, f.device_id, 0, m.created_ms FROM fanout_unanswered f
                JOIN outbox_messages m ON m.id = f.message_id;
        """,
        // v11: an answered member is noted by its device id (the first of the devices sharing its token, as
        // fanout_members names it), not by its token. The fan-out sends in device id order, so each settle appends
        // its notes at the end of the key, as push_answers does, where tokens landed all over the table: a
        // 10,000-device fan-out wrote 19.7 MB to the WAL and now 14. Notes already written are carried over.
        """
        CREATE TABLE fanout_sent_v11 (
            message_id INTEGER NOT NULL,
            device_id TEXT NOT NULL,
            PRIMARY KEY (message_id, device_id)
        ) STRICT, WITHOUT ROWID;
        INSERT OR IGNORE INTO fanout_sent_v11 SELECT f.message_id, f.device_id
            FROM fanout_sent s JOIN fanout_members f ON f.message_id = s.message_id AND f.token = s.token;
        DROP VIEW pending_pushes;
        DROP VIEW fanout_unanswered;
        DROP TABLE fanout_sent;
        ALTER TABLE fanout_sent_v11 RENAME TO fanout_sent;
        CREATE VIEW fanout_unanswered AS
            SELECT f.message_id, f.device_id, f.token FROM fanout_members f
            WHERE NOT EXISTS (SELECT 1 FROM fanout_sent s WHERE s.message_id = f.message_id AND s.device_id = f.device_id);
        CREATE VIEW pending_pushes AS
            SELECT o.message_id, o.device_id, o.attempts, o.due_ms FROM outbox o
            UNION ALL
            SELECT f.message_id, f.device_id, 0, m.created_ms FROM fanout_unanswered f
                JOIN outbox_messages m ON m.id = f.message_id;
        """,
    ]
}
