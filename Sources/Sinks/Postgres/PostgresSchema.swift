import HealthgateCore

/// The sink's tables and views, as numbered migrations. Each is applied once, in a transaction,
/// under an advisory lock (two gateways starting at once against one database take turns), and
/// recorded in `schema_migrations`. A database at a version this binary does not know is refused.
/// `{schema}` stands for the schema, quoted by libpq; nothing else is spliced into SQL.
enum PostgresSchema {
    struct Migration {
        var version: Int
        var description: String
        var sql: [String]
    }

    static var latest: Int { migrations.last!.version }

    static let migrations: [Migration] = [
        Migration(
            version: 1, description: "records, types, and the daily_totals, sleep_nights, workouts and latest views",
            sql: [
                """
                CREATE TABLE {schema}.records (
                    device        text NOT NULL,
                    uuid          text NOT NULL,
                    part          integer NOT NULL DEFAULT 0,
                    parts         integer,
                    kind          text NOT NULL,
                    type          text NOT NULL,
                    start_at      timestamptz,
                    end_at        timestamptz,
                    local_start   timestamp,
                    local_day     date GENERATED ALWAYS AS (local_start::date) STORED,
                    value         double precision,
                    text_value    text,
                    code          integer,
                    unit          text,
                    activity      text,
                    duration_s    double precision,
                    energy_kcal   double precision,
                    distance_m    double precision,
                    source_app    text,
                    source_device text,
                    utc_offset    integer,
                    receiver      text NOT NULL,
                    metadata      jsonb,
                    fields        jsonb,
                    extra         jsonb,
                    received_at   timestamptz NOT NULL DEFAULT now(),
                    updated_at    timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (device, uuid, part)
                )
                """,
                "CREATE INDEX records_device_type_start ON {schema}.records (device, type, start_at)",
                "CREATE INDEX records_type_day ON {schema}.records (type, local_day)",
                "CREATE INDEX records_workout_uuid ON {schema}.records (device, (extra->>'workout_uuid')) WHERE extra ? 'workout_uuid'",
                """
                CREATE TABLE {schema}.types (
                    type        text PRIMARY KEY,
                    kind        text NOT NULL,
                    healthkit   text NOT NULL,
                    unit        text,
                    cumulative  boolean NOT NULL
                )
                """,
                // Cumulative types summed per phone and local day (the phone's own, from the records'
                // UTC offset, else the sink's time_zone).
                """
                CREATE VIEW {schema}.daily_totals AS
                SELECT r.device, r.type, r.local_day AS day, sum(r.value) AS total, min(r.unit) AS unit, count(*) AS samples
                FROM {schema}.records r JOIN {schema}.types t ON t.type = r.type AND t.cumulative
                WHERE r.kind = 'quantity' AND r.value IS NOT NULL
                GROUP BY r.device, r.type, r.local_day
                """,
                // A night is the local day of its evening: sleep ending before noon counts for the
                // day before.
                """
                CREATE VIEW {schema}.sleep_nights AS
                SELECT r.device,
                       ((r.local_start + (r.end_at - r.start_at)) - interval '12 hours')::date AS night,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value LIKE 'asleep%') / 3600.0)::double precision AS asleep_hours,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'in_bed') / 60.0)::double precision AS in_bed_min,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'awake') / 60.0)::double precision AS awake_min,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_core') / 60.0)::double precision AS core_min,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_deep') / 60.0)::double precision AS deep_min,
                       (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_rem') / 60.0)::double precision AS rem_min,
                       min(r.start_at) AS bedtime, max(r.end_at) AS wake_time, count(*) AS samples
                FROM {schema}.records r
                WHERE r.type = 'sleep_analysis' AND r.start_at IS NOT NULL AND r.end_at IS NOT NULL
                GROUP BY 1, 2
                """,
                // Workouts with the heart rate measured during them: the heart-rate samples linked by
                // extra.workout_uuid, or in the workout's window — computed when asked, so it does
                // not matter whether the samples or the workout arrived first.
                """
                CREATE VIEW {schema}.workouts AS
                SELECT w.device, w.uuid, w.activity, w.start_at, w.end_at, w.duration_s, w.energy_kcal, w.distance_m,
                       w.source_app, w.source_device, w.local_day AS day,
                       hr.avg_bpm, hr.max_bpm, hr.samples AS heart_rate_samples, w.metadata, w.fields
                FROM {schema}.records w
                LEFT JOIN LATERAL (
                    SELECT avg(h.value) AS avg_bpm, max(h.value) AS max_bpm, count(*) AS samples
                    FROM {schema}.records h
                    WHERE h.device = w.device AND h.type = 'heart_rate' AND h.value IS NOT NULL
                      AND ((h.extra->>'workout_uuid') = w.uuid
                           OR (h.start_at >= w.start_at AND h.start_at <= w.end_at))
                ) hr ON true
                WHERE w.kind = 'workout' AND w.type = 'workout'
                """,
                // The newest value of every quantity and category type, per phone.
                """
                CREATE VIEW {schema}.latest AS
                SELECT DISTINCT ON (r.device, r.type)
                       r.device, r.type, r.value, r.text_value, r.unit, r.start_at, r.end_at, r.source_app, r.source_device
                FROM {schema}.records r
                WHERE r.kind IN ('quantity', 'category') AND r.start_at IS NOT NULL
                ORDER BY r.device, r.type, r.start_at DESC, r.end_at DESC
                """
            ]),
        Migration(
            version: 2, description: "records.tags: the labels routes add",
            sql: [
                "ALTER TABLE {schema}.records ADD COLUMN tags jsonb"
            ]),
        // The read API pages through records in time order, of every device or of one.
        Migration(
            version: 3, description: "indexes for reading records back in time order",
            sql: [
                "CREATE INDEX records_start ON {schema}.records (start_at, device, uuid, part)",
                "CREATE INDEX records_device_start ON {schema}.records (device, start_at, uuid, part)"
            ]),
        Migration(
            version: 4, description: "nights and workouts as the apps send them: sleep summaries, workout heart rate",
            sql: [
                // A number in a sender's JSON — a JSON number, or a decimal in a string as HealthSync's
                // metadata has them ("142") — or NULL for anything else (other text, an object, a
                // number no double holds): the views read senders' fields without failing on one.
                """
                CREATE FUNCTION {schema}.num(j jsonb) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
                  SELECT CASE WHEN jsonb_typeof(j) = 'number' OR (jsonb_typeof(j) = 'string'
                                                                     AND (j #>> '{}') ~ '^-?[0-9]{1,15}(\\.[0-9]{1,15})?$')
                              THEN CASE WHEN abs((j #>> '{}')::numeric) < 1e300 THEN (j #>> '{}')::double precision END END
                $$
                """,
                // A heart rate a sender gives: a number of beats a minute between 0 and 400.
                """
                CREATE FUNCTION {schema}.bpm(j jsonb) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
                  SELECT CASE WHEN {schema}.num(j) > 0 AND {schema}.num(j) < 400 THEN {schema}.num(j) END
                $$
                """,
                // A night is the local day of its evening. An app's summary of a night (Health Auto
                // Export's aggregated sleep: totals in the record's unit, hours unless it says
                // otherwise) wins over segments of the same night; else the segments are summed.
                """
                CREATE OR REPLACE VIEW {schema}.sleep_nights AS
                WITH summaries AS (
                    SELECT DISTINCT ON (r.device, k.night) r.device, k.night, r.fields AS f, k.per_h, r.start_at, r.end_at
                    FROM {schema}.records r,
                         LATERAL (SELECT ((r.local_start + (r.end_at - r.start_at)) - interval '12 hours')::date AS night,
                                         CASE r.unit WHEN 'min' THEN 60.0 WHEN 's' THEN 3600.0 ELSE 1.0 END AS per_h) k
                    WHERE r.type = 'sleep_analysis' AND r.kind = 'summary' AND r.start_at IS NOT NULL AND r.end_at IS NOT NULL
                    ORDER BY r.device, k.night, r.updated_at DESC, r.uuid
                ), segments AS (
                    SELECT r.device,
                           ((r.local_start + (r.end_at - r.start_at)) - interval '12 hours')::date AS night,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value LIKE 'asleep%') / 3600.0)::double precision AS asleep_hours,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'in_bed') / 60.0)::double precision AS in_bed_min,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'awake') / 60.0)::double precision AS awake_min,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_core') / 60.0)::double precision AS core_min,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_deep') / 60.0)::double precision AS deep_min,
                           (sum(extract(epoch FROM r.end_at - r.start_at)) FILTER (WHERE r.text_value = 'asleep_rem') / 60.0)::double precision AS rem_min,
                           min(r.start_at) AS bedtime, max(r.end_at) AS wake_time, count(*) AS samples
                    FROM {schema}.records r
                    WHERE r.type = 'sleep_analysis' AND r.kind = 'category' AND r.start_at IS NOT NULL AND r.end_at IS NOT NULL
                    GROUP BY 1, 2
                )
                SELECT s.device, s.night,
                       coalesce({schema}.num(s.f->'totalSleep'),
                                CASE WHEN s.f ?| array['asleep', 'core', 'deep', 'rem']
                                     THEN coalesce({schema}.num(s.f->'asleep'), 0) + coalesce({schema}.num(s.f->'core'), 0)
                                          + coalesce({schema}.num(s.f->'deep'), 0) + coalesce({schema}.num(s.f->'rem'), 0) END) / s.per_h AS asleep_hours,
                       {schema}.num(s.f->'inBed') * 60 / s.per_h AS in_bed_min,
                       {schema}.num(s.f->'awake') * 60 / s.per_h AS awake_min,
                       {schema}.num(s.f->'core') * 60 / s.per_h AS core_min,
                       {schema}.num(s.f->'deep') * 60 / s.per_h AS deep_min,
                       {schema}.num(s.f->'rem') * 60 / s.per_h AS rem_min,
                       s.start_at AS bedtime, s.end_at AS wake_time, 1::bigint AS samples, 'summary'::text AS made_from
                FROM summaries s
                UNION ALL
                SELECT g.device, g.night, g.asleep_hours, g.in_bed_min, g.awake_min, g.core_min, g.deep_min, g.rem_min,
                       g.bedtime, g.wake_time, g.samples, 'segments'::text
                FROM segments g
                WHERE NOT EXISTS (SELECT 1 FROM summaries s WHERE s.device = g.device AND s.night = g.night)
                """,
                // A workout's heart rate: what the workout itself says (Health Auto Export's
                // avgHeartRate/maxHeartRate or heartRate {avg, max}, else its heartRateData minutes;
                // HealthSync's metadata average_heart_rate_bpm/max_heart_rate_bpm) wins; else the
                // heart-rate samples linked to it or in its window.
                """
                CREATE OR REPLACE VIEW {schema}.workouts AS
                SELECT w.device, w.uuid, w.activity, w.start_at, w.end_at, w.duration_s, w.energy_kcal, w.distance_m,
                       w.source_app, w.source_device, w.local_day AS day,
                       coalesce(own.avg_bpm, hr.avg_bpm) AS avg_bpm, coalesce(own.max_bpm, hr.max_bpm) AS max_bpm,
                       hr.samples AS heart_rate_samples, w.metadata, w.fields,
                       CASE WHEN own.avg_bpm IS NOT NULL OR own.max_bpm IS NOT NULL THEN 'workout'
                            WHEN hr.samples > 0 THEN 'samples' END AS heart_rate_from
                FROM {schema}.records w
                LEFT JOIN LATERAL (
                    SELECT avg(h.value) AS avg_bpm, max(h.value) AS max_bpm, count(*) AS samples
                    FROM {schema}.records h
                    WHERE h.device = w.device AND h.type = 'heart_rate' AND h.value IS NOT NULL
                      AND ((h.extra->>'workout_uuid') = w.uuid
                           OR (h.start_at >= w.start_at AND h.start_at <= w.end_at))
                ) hr ON true
                LEFT JOIN LATERAL (
                    SELECT coalesce({schema}.bpm(w.fields->'avgHeartRate'->'qty'), {schema}.bpm(w.fields->'heartRate'->'avg'->'qty'),
                                    {schema}.bpm(w.metadata->'average_heart_rate_bpm'), minutes.avg_bpm) AS avg_bpm,
                           coalesce({schema}.bpm(w.fields->'maxHeartRate'->'qty'), {schema}.bpm(w.fields->'heartRate'->'max'->'qty'),
                                    {schema}.bpm(w.metadata->'max_heart_rate_bpm'), minutes.max_bpm) AS max_bpm
                    FROM (SELECT avg({schema}.bpm(e->'Avg')) AS avg_bpm, max({schema}.bpm(e->'Max')) AS max_bpm
                          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.fields->'heartRateData') = 'array'
                                                         THEN w.fields->'heartRateData' ELSE '[]'::jsonb END) e) minutes
                ) own ON true
                WHERE w.kind = 'workout' AND w.type = 'workout'
                """
            ]),
        Migration(
            version: 5, description: "records.time_zone: the sample's time zone, where the sender named it",
            sql: [
                "ALTER TABLE {schema}.records ADD COLUMN time_zone text"
            ]),
        Migration(
            version: 6, description: "sleep nights: a sleep day from 18:00 local, overlapping sources counted once",
            sql: [
                // The seconds a set of time ranges covers: 0 for an empty set, NULL for none at all.
                """
                CREATE FUNCTION {schema}.covered_seconds(m tstzmultirange) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
                  SELECT CASE WHEN m IS NOT NULL THEN coalesce(sum(extract(epoch FROM upper(r) - lower(r))), 0)::double precision END
                  FROM unnest(coalesce(m, '{}'::tstzmultirange)) r
                $$
                """,
                // A night is the sleep day, from 18:00 local to 18:00 the next day, that a segment's
                // start falls in, or a summary's end (its start may be made up: an app that gives the
                // night's date alone), named by its evening's date (the mqtt sink's rule). Segments of several
                // sources (a watch and a phone) count each moment once: asleep is the time any says
                // asleep, a stage the time any says that stage, awake only where none says asleep.
                // An app's summary of the night still wins over its segments.
                """
                CREATE OR REPLACE VIEW {schema}.sleep_nights AS
                WITH summaries AS (
                    SELECT DISTINCT ON (r.device, k.night) r.device, k.night, r.fields AS f, k.per_h, r.start_at, r.end_at
                    FROM {schema}.records r,
                         LATERAL (SELECT (r.local_start + (r.end_at - r.start_at) - interval '18 hours')::date AS night,
                                         CASE r.unit WHEN 'min' THEN 60.0 WHEN 's' THEN 3600.0 ELSE 1.0 END AS per_h) k
                    WHERE r.type = 'sleep_analysis' AND r.kind = 'summary' AND r.start_at IS NOT NULL AND r.end_at IS NOT NULL
                    ORDER BY r.device, k.night, r.updated_at DESC, r.uuid
                ), spans AS (
                    SELECT r.device, (r.local_start - interval '18 hours')::date AS night,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value LIKE 'asleep%') AS asleep,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value = 'in_bed') AS in_bed,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value = 'awake') AS awake,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value = 'asleep_core') AS core,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value = 'asleep_deep') AS deep,
                           range_agg(tstzrange(r.start_at, r.end_at)) FILTER (WHERE r.text_value = 'asleep_rem') AS rem,
                           min(r.start_at) AS bedtime,
                           coalesce(max(r.end_at) FILTER (WHERE r.text_value LIKE 'asleep%'), max(r.end_at)) AS wake_time,
                           count(*) AS samples
                    FROM {schema}.records r
                    WHERE r.type = 'sleep_analysis' AND r.kind = 'category' AND r.start_at IS NOT NULL AND r.end_at IS NOT NULL
                      AND r.end_at >= r.start_at
                    GROUP BY 1, 2
                ), segments AS (
                    SELECT g.device, g.night,
                           {schema}.covered_seconds(g.asleep) / 3600.0 AS asleep_hours,
                           {schema}.covered_seconds(g.in_bed) / 60.0 AS in_bed_min,
                           {schema}.covered_seconds(g.awake - coalesce(g.asleep, '{}'::tstzmultirange)) / 60.0 AS awake_min,
                           {schema}.covered_seconds(g.core) / 60.0 AS core_min,
                           {schema}.covered_seconds(g.deep) / 60.0 AS deep_min,
                           {schema}.covered_seconds(g.rem) / 60.0 AS rem_min,
                           g.bedtime, g.wake_time, g.samples
                    FROM spans g
                )
                SELECT s.device, s.night,
                       coalesce({schema}.num(s.f->'totalSleep'),
                                CASE WHEN s.f ?| array['asleep', 'core', 'deep', 'rem']
                                     THEN coalesce({schema}.num(s.f->'asleep'), 0) + coalesce({schema}.num(s.f->'core'), 0)
                                          + coalesce({schema}.num(s.f->'deep'), 0) + coalesce({schema}.num(s.f->'rem'), 0) END) / s.per_h AS asleep_hours,
                       {schema}.num(s.f->'inBed') * 60 / s.per_h AS in_bed_min,
                       {schema}.num(s.f->'awake') * 60 / s.per_h AS awake_min,
                       {schema}.num(s.f->'core') * 60 / s.per_h AS core_min,
                       {schema}.num(s.f->'deep') * 60 / s.per_h AS deep_min,
                       {schema}.num(s.f->'rem') * 60 / s.per_h AS rem_min,
                       s.start_at AS bedtime, s.end_at AS wake_time, 1::bigint AS samples, 'summary'::text AS made_from
                FROM summaries s
                UNION ALL
                SELECT g.device, g.night, g.asleep_hours, g.in_bed_min, g.awake_min, g.core_min, g.deep_min, g.rem_min,
                       g.bedtime, g.wake_time, g.samples, 'segments'::text
                FROM segments g
                WHERE NOT EXISTS (SELECT 1 FROM summaries s WHERE s.device = g.device AND s.night = g.night)
                """
            ])
    ]

    /// Every type the registry knows, for `types` (kept up to date at every open).
    static func typeRows() -> [UInt8] {
        var w = PGCopyWriter(capacity: 32 << 10)
        for t in HealthTypes.all {
            w.text(t.name); w.text(t.kind.rawValue); w.text(t.hkIdentifier); w.text(t.unit)
            w.text(t.aggregation == .cumulative ? "t" : "f")
            w.endRow()
        }
        return w.bytes
    }
}
