import HealthgateCrypto
import HealthgateCore
import Posix

/// `healthgate init`: writes a config with a fresh token and HMAC secret (mode 0600).
struct InitCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let path = options.config ?? ConfigSource.conventionalPath
        if FileIO.exists(path) && !options.flags.contains("--force") {
            throw UsageError("\(path) exists; pass --force to replace it (its token and secret would change)")
        }
        let text = DefaultConfig.render(listen: ConfigLoader.defaultListen, dataDir: ConfigLoader.defaultDataDir,
                                        token: Crypto.newToken(), secret: Crypto.newHMACSecret())
        try FileIO.writeAtomically(path, Array(text.utf8), mode: 0o600)
        print("wrote \(path) (mode 0600: it holds the token and the HMAC secret)")
        print("next: `healthgate check --config \(path)`, then `healthgate serve --config \(path)`")
        return 0
    }
}
