/// healthgate's version: what `healthgate version` prints, and what the sinks say they are
/// (Home Assistant's `origin`, PostgreSQL's `schema_migrations.by`).
public enum Healthgate {
    public static let version = "0.1.0"
}
