import HealthgateCrypto
import HealthgateCore
import Posix

/// `healthgate init`: writes a config (mode 0600) with the token and HMAC secret the embedded
/// default already uses in the data dir, if `serve` made some (a phone may be paired with
/// them), else fresh ones; `--new-credentials` makes fresh ones anyway.
struct InitCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let path = options.config ?? ConfigSource.conventionalPath
        if FileIO.exists(path) && !options.flags.contains("--force") {
            throw UsageError("\(path) exists; pass --force to replace it (its token and secret would change)")
        }
        let dataDir = DefaultConfig.dataDir
        let kept = options.flags.contains("--new-credentials") ? nil : try DefaultConfig.kept(dataDir: dataDir)
        let (token, secret) = kept ?? (Crypto.newToken(), Crypto.newHMACSecret())
        let text = DefaultConfig.render(listen: ConfigLoader.defaultListen, dataDir: dataDir, token: token, secret: secret)
        try FileIO.writeAtomically(path, Array(text.utf8), mode: 0o600)
        print("wrote \(path) (mode 0600: it holds the token and the HMAC secret)")
        if kept != nil {
            print(
                "kept the token and secret of \(FileIO.join(dataDir, "credentials")): a phone paired with `serve` uses them "
                    + "and goes on working (`--new-credentials` makes fresh ones; then pair every phone again)")
        } else if options.flags.contains("--new-credentials"), FileIO.exists(FileIO.join(dataDir, "credentials")) {
            print("fresh token and secret: a phone paired before must be paired again (`healthgate link --qr`)")
        }
        print("next: `healthgate check --config \(path)`, then `healthgate serve --config \(path)`")
        return 0
    }
}
