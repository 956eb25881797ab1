import Synchronization

/// healthgate's version: what `healthgate version` prints, and what the sinks say they are
/// (Home Assistant's `origin`, PostgreSQL's `schema_migrations.by`).
public enum Healthgate {
    public static let version = "0.1.0"

    /// The commit and day the running binary was built from ("unknown" where no stamp was set:
    /// test binaries, a build without git). The `healthgate` executable sets it first thing.
    public static var build: BuildStamp {
        get { stamp.withLock { $0 } }
        set { stamp.withLock { $0 = newValue } }
    }
    private static let stamp = Mutex(BuildStamp(commit: "unknown", date: "unknown"))
}

public struct BuildStamp: Sendable, Equatable {
    public var commit: String
    public var date: String
    public init(commit: String, date: String) {
        self.commit = commit
        self.date = date
    }
}
