import Foundation
@testable import Gateway
import Glibc
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The commands as a user types them, with their output and exit codes.
@Suite struct CLITests {
    struct Run {
        var status: Int32
        var out: String
        var err: String
    }

    static func run(_ args: [String], cwd: String? = nil, env: [String: String] = [:]) throws -> Run {
        var e = ProcessInfo.processInfo.environment
        e["HEALTHGATE_CONFIG"] = nil
        for (k, v) in env { e[k] = v }
        let r = try Command.runApart(ServeProcess.binary, args, environment: e, cwd: cwd)
        return Run(status: r.status, out: r.out, err: r.err)
    }

    @Test func versionAndUsage() throws {
        let v = try Self.run(["version"])
        #expect(v.status == 0)
        // The commit the binary was built from, and the day: what a bug report needs.
        let (grc, head) = try Command.run("/usr/bin/git", ["-C", ContribTests.root, "rev-parse", "HEAD"])
        try #require(grc == 0, "\(head)")
        let commit = String(head.prefix(12))
        #expect(v.out.hasPrefix("healthgate \(CLI.version) (commit \(commit)"), "\(v.out)")
        #expect(v.out.range(of: #", built 2\d{3}-\d{2}-\d{2}\)\n$"#, options: .regularExpression) != nil, "\(v.out)")
        let none = try Self.run([])
        #expect(none.status == 2)
        #expect(none.err.contains("usage:"))
        let typo = try Self.run(["serv"])
        #expect(typo.status == 2)
        #expect(typo.err.contains("did you mean \"serve\""))
        let badFlag = try Self.run(["check", "--confg", "x"])
        #expect(badFlag.status == 2)
        #expect(badFlag.err.contains("did you mean \"--config\""))
    }

    @Test func initThenCheckThenLink() throws {
        let dir = ServeProcess.makeTempDir("cli")
        let i = try Self.run(["init"], cwd: dir)
        #expect(i.status == 0, "\(i.err)")
        var st = stat()
        #expect(stat(dir + "/healthgate.yaml", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        let again = try Self.run(["init"], cwd: dir)
        #expect(again.status == 2)
        #expect(again.err.contains("--force"))
        let c = try Self.run(["check"], cwd: dir)
        #expect(c.status == 0, "\(c.err)")
        #expect(c.out.contains("config healthgate.yaml: ok"))
        #expect(c.out.contains("syncky: syncky POST /syncky, auth bearer, HMAC signatures required"))
        #expect(c.out.contains("archive: file"))
        let text = try String(contentsOfFile: dir + "/healthgate.yaml", encoding: .utf8)
        let token = try #require(text.split(separator: "\"").first { $0.hasPrefix("hg_") })
        let l = try Self.run(["link", "--host", "gw.local"], cwd: dir)
        #expect(l.status == 0)
        #expect(
            l.out.hasPrefix(
                "syncky://webhook?v=1&name=healthgate&url=http%3A%2F%2Fgw.local%3A8080%2Fsyncky&format=native&auth=bearer&token=\(token)&hmac=whsec_"
            ))
        let dev = try Self.run(["link", "--scheme", "syncky-dev", "--format", "csv"], cwd: dir)
        #expect(dev.out.hasPrefix("syncky-dev://webhook?"))
        #expect(dev.out.contains("&format=csv&"))
        #expect(try Self.run(["link", "--scheme", "http"], cwd: dir).status == 2)
    }

    @Test func checkReportsEveryProblemWithExitCodeTwo() throws {
        let dir = ServeProcess.makeTempDir("cli")
        try """
        receivers:
          phone: {kind: syncky, auth: {type: bearer, tokn: x}}
        sinks:
          archive: {kind: fil, path: x}
        """.write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let c = try Self.run(["check", "--config", dir + "/bad.yaml"])
        #expect(c.status == 2)
        #expect(c.err.contains("bad.yaml:2:"))
        #expect(c.err.contains("unknown key \"tokn\""))
        #expect(c.err.contains("unknown sink kind \"fil\" — did you mean \"file\"?"))
        #expect(c.err.contains("2 problem(s)"))
        let missing = try Self.run(["check", "--config", dir + "/nope.yaml"])
        #expect(missing.status == 2)
        #expect(missing.err.contains("healthgate init"))
        // serve refuses the same config and starts nothing.
        let s = try Self.run(["serve", "--config", dir + "/bad.yaml"])
        #expect(s.status == 2)
    }

    /// `healthgate check FILE` is `check --config FILE`; one file, given one way.
    @Test func checkTakesTheConfigFileAsItsArgument() throws {
        let dir = ServeProcess.makeTempDir("cli")
        #expect(try Self.run(["init", dir + "/a.yaml"]).status == 0)
        let c = try Self.run(["check", dir + "/a.yaml"])
        #expect(c.status == 0, "\(c.err)")
        #expect(c.out.contains("config \(dir)/a.yaml: ok"))
        let two = try Self.run(["check", dir + "/a.yaml", dir + "/b.yaml"])
        #expect(two.status == 2)
        #expect(two.err.contains("one config file, not 2"))
        let both = try Self.run(["check", dir + "/a.yaml", "--config", dir + "/a.yaml"])
        #expect(both.status == 2)
        #expect(both.err.contains("not both"))
        let missing = try Self.run(["check", dir + "/nope.yaml"])
        #expect(missing.status == 2)
        #expect(missing.err.contains("no such config file"))
    }

    /// A `${VAR}` unset where `check` runs (a secret the server's environment gives) is a
    /// warning, the rest checked with a stand-in; `--require-env` and `serve` refuse it.
    @Test func checkSaysWhichVariablesAreUnsetAndChecksTheRest() throws {
        let dir = ServeProcess.makeTempDir("cli")
        let name = "HG_TEST_UNSET_\(getpid())"
        func config(listen: String) -> String {
            """
            listen: \(listen)
            data_dir: \(dir)/data
            receivers:
              phone: {kind: syncky, auth: {type: bearer, token: "${\(name)}"}}
            sinks:
              archive: {kind: file, path: a.ndjson}
            """
        }
        try config(listen: "127.0.0.1:0").write(toFile: dir + "/env.yaml", atomically: true, encoding: .utf8)
        let c = try Self.run(["check", dir + "/env.yaml"])
        #expect(c.status == 0, "\(c.err)")
        #expect(c.err.contains("warning: environment variable \(name) is not set here"))
        #expect(c.out.contains("ok (with 1 variable(s) not set here: \(name))"))
        #expect(!c.out.contains("stand-in"), "the stand-in is not shown as if it were the token")
        let strict = try Self.run(["check", dir + "/env.yaml", "--require-env"])
        #expect(strict.status == 2)
        #expect(strict.err.contains("environment variable \(name) is not set; set it"))
        let set = try Self.run(["check", dir + "/env.yaml", "--require-env"], env: [name: "a-real-token-0123456789"])
        #expect(set.status == 0, "\(set.err)")
        #expect(!set.err.contains("warning"))
        // Other problems are still reported, after the warning.
        try """
        receivers:
          phone: {kind: syncky, auth: {type: bearer, token: "${\(name)}"}}
        sinks:
          archive: {kind: fil, path: x}
        """.write(toFile: dir + "/both.yaml", atomically: true, encoding: .utf8)
        let both = try Self.run(["check", dir + "/both.yaml"])
        #expect(both.status == 2)
        #expect(both.err.contains("\(name) is not set here") && both.err.contains("unknown sink kind \"fil\""))
        // Where the stand-in is not what belongs there (an address, a url), the problem is said
        // as the unset variable it is, not as the stand-in's text.
        try config(listen: "${\(name)_LISTEN}").write(toFile: dir + "/listen.yaml", atomically: true, encoding: .utf8)
        let listen = try Self.run(["check", dir + "/listen.yaml"])
        #expect(listen.status == 2)
        #expect(listen.err.contains("listen.yaml:1:9: listen: environment variable \(name)_LISTEN is not set"), "\(listen.err)")
        #expect(!listen.err.contains("stand-in-for"), "\(listen.err)")
        // Found by the stand-in's text where the problem is said at another node (a route's
        // list); and a stand-in printed by check is shown as the variable it stands for.
        try """
        listen: 127.0.0.1:0
        data_dir: "${\(name)_DATA}"
        receivers:
          phone: {kind: syncky, auth: {type: bearer, token: "${\(name)}"}}
        routes:
          - {name: r, from: ["*"], to: ["${\(name)_SINK}"]}
        sinks:
          archive: {kind: file, path: a.ndjson}
        """.write(toFile: dir + "/route.yaml", atomically: true, encoding: .utf8)
        let route = try Self.run(["check", dir + "/route.yaml"])
        #expect(route.status == 2)
        #expect(route.err.contains("environment variable \(name)_SINK is not set; set it"), "\(route.err)")
        #expect(!route.err.contains("stand-in-for"), "\(route.err)")
        try String(contentsOfFile: dir + "/route.yaml", encoding: .utf8).replacingOccurrences(of: "${\(name)_SINK}", with: "archive")
            .write(toFile: dir + "/route.yaml", atomically: true, encoding: .utf8)
        let shown = try Self.run(["check", dir + "/route.yaml"], cwd: dir)
        #expect(shown.status == 0, "\(shown.err)")
        #expect(shown.out.contains("${\(name)_DATA}") && !shown.out.contains("stand-in-for"), "\(shown.out)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/stand-in-for-\(name)_DATA-0123456789abcdef"), "check made nothing")
        let s = try Self.run(["serve", dir + "/env.yaml"])
        #expect(s.status == 2)
        #expect(s.err.contains("environment variable \(name) is not set"))
    }

    /// `serve` with no config: makes the data dir, a token and a secret once (0600), and
    /// prints the setup link; a second start reuses them.
    /// An existing data dir that others may read (archives would be group readable) is set to
    /// 0700 when serve starts, and the log says so.
    @Test func anExistingDataDirOthersCanReadIsMadePrivate() throws {
        let dir = ServeProcess.makeTempDir("open")
        #expect(chmod(dir, 0o755) == 0)
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                receivers:
                  hae: {kind: hae, auth: {type: bearer, token: t}}
                """, dataDir: dir)
        var st = stat()
        #expect(stat(dir, &st) == 0 && st.st_mode & 0o777 == 0o700)
        serve.stop()
        #expect(serve.stderrText.contains("had mode 755; set to 700"), "\(serve.stderrText)")
    }

    /// The embedded default makes its token and secret once and keeps them. Its setup link
    /// holds both: `serve` prints it on a terminal only (stdout here is a pipe, as under
    /// systemd or with `> file`); `healthgate link` prints it on request.
    @Test func theEmbeddedDefaultKeepsItsCredentials() throws {
        let dir = ServeProcess.makeTempDir("default")
        let env = ["HEALTHGATE_DATA_DIR": dir + "/data", "HEALTHGATE_LISTEN": "127.0.0.1:0"]
        func start() throws -> (ServeProcess, String) {
            let s = try ServeProcess(arguments: ["serve"], cwd: dir, environment: env)
            #expect(!s.stdoutText.contains("token="), "\(s.stdoutText)")
            #expect(!s.stdoutText.contains("whsec_"))
            #expect(s.stdoutText.contains("run `healthgate link --qr --receiver syncky`"), "\(s.stdoutText)")
            let link = try CLITests.run(["link"], cwd: dir, env: env)
            #expect(link.status == 0, "\(link.err)")
            return (s, link.out.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let (first, link1) = try start()
        var st = stat()
        #expect(stat(dir + "/data/credentials", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(stat(dir + "/data", &st) == 0 && st.st_mode & 0o777 == 0o700)
        #expect(link1.hasPrefix("syncky://webhook?"))
        #expect(link1.contains("&auth=bearer&token=hg_"))
        #expect(link1.contains("&hmac=whsec_"))
        #expect(first.stdoutText.contains("config (embedded default)"))
        first.stop()
        #expect(!first.stderrText.contains("token=") && !first.stderrText.contains("whsec_"))
        let (second, link2) = try start()
        #expect(
            link1.split(separator: "&").filter { $0.hasPrefix("token=") || $0.hasPrefix("hmac=") }
                == link2.split(separator: "&").filter { $0.hasPrefix("token=") || $0.hasPrefix("hmac=") })
        second.stop()
    }

    /// On a terminal, serve shows the link and its QR code (`script` gives it a pseudo-terminal).
    @Test func onATerminalServeShowsTheLinkAndQRCode() throws {
        let dir = ServeProcess.makeTempDir("tty")
        let out = dir + "/typescript"
        // serve is ended by a timeout inside the terminal's session: one outside it reaches only
        // `script`, and a serve that outlived it went on in that session (SIGHUP is a reload).
        let cmd =
            "HEALTHGATE_DATA_DIR=\(dir)/data HEALTHGATE_LISTEN=127.0.0.1:0 timeout -s KILL 60 script -qfec "
            + "'timeout --foreground -s INT 3 \(ServeProcess.binary) serve' \(out) >/dev/null 2>&1; cat \(out)"
        let (_, text) = try HTTPServerTests.shell("cd \(dir) && " + cmd)
        #expect(text.contains("syncky://webhook?") && text.contains("token=hg_"), "\(text)")
        #expect(text.contains("█"))
    }
}

/// The terminal QR code decodes back to the setup link (zbarimg, from Debian's zbar-tools,
/// reads the code as a phone camera would).
@Suite struct TerminalQRTests {
    @Test func theQRCodeDecodesToTheLink() throws {
        let link =
            "syncky://webhook?v=1&name=Vector%20header&url=https%3A%2F%2Freceiver.example%2Fhook%2Fheader&format=native&auth=header&header=X-Api-Key&token=vec_key_x9VHBdwKQo-KwlcOB9v4cwlAawCa0nF2NWQRO1qLDlI&types=heart_rate,steps"
        let grid = try TerminalQR.modules(link, quietZone: 4)
        // A portable bitmap, 8 pixels a module.
        let scale = 8
        var pbm = "P1\n\(grid.count * scale) \(grid.count * scale)\n"
        for row in grid {
            let line = row.flatMap { Array(repeating: $0 ? "1" : "0", count: scale) }.joined(separator: " ")
            for _ in 0..<scale { pbm += line + "\n" }
        }
        let path = ServeProcess.makeTempDir("qr") + "/link.pbm"
        try pbm.write(toFile: path, atomically: true, encoding: .utf8)
        let (rc, out) = try HTTPServerTests.shell("zbarimg --quiet --raw \(path) 2>/dev/null")
        #expect(rc == 0, "\(out)")
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == link)
        // The terminal text: two module rows a line, colours reset at each line's end.
        let text = try TerminalQR.render(link)
        #expect(text.split(separator: "\n").count == (grid.count - 2 * 4 + 2 * 2 + 1) / 2)
        #expect(text.split(separator: "\n").allSatisfy { $0.hasSuffix("\u{1B}[0m") })
    }

    @Test func linkPrintsTheQRCodeOnRequest() throws {
        let dir = ServeProcess.makeTempDir("cli")
        #expect(try CLITests.run(["init"], cwd: dir).status == 0)
        let plain = try CLITests.run(["link"], cwd: dir)
        let qr = try CLITests.run(["link", "--qr"], cwd: dir)
        #expect(plain.out.split(separator: "\n").count == 1)
        #expect(qr.out.contains("█"))
        #expect(qr.out.hasPrefix(plain.out))
    }

    /// Issue 47: `check` said "ok" for a data dir nobody can write; serve then failed.
    @Test func checkRefusesADataDirThatCannotBeMade() throws {
        let dir = ServeProcess.makeTempDir("check")
        let file = dir + "/healthgate.yaml"
        try
            "data_dir: /proc/healthgate-data\nreceivers: {a: {kind: hae}}\nroutes: [{from: [a], to: [s]}]\nsinks: {s: {kind: file, path: x.ndjson}}\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let r = try CLITests.run(["check", "--config", file])
        #expect(r.status == 2 && r.err.contains("data_dir /proc/healthgate-data cannot be made"), "\(r.status) \(r.out) \(r.err)")
        try "data_dir: \(dir)/data\nreceivers: {a: {kind: hae}}\nroutes: [{from: [a], to: [s]}]\nsinks: {s: {kind: file, path: x.ndjson}}\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLITests.run(["check", "--config", file]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: dir + "/data")) // checked, not made
    }

    /// Issue 47: `healthgate COMMAND --help` and `healthgate help COMMAND` print that command's
    /// usage and exit 0 (`serve --help` used to start serving).
    @Test func eachCommandHasItsHelp() throws {
        for command in ["serve", "init", "check", "link", "write", "delete", "status", "resume", "forget", "replay", "version"] {
            for args in [[command, "--help"], [command, "-h"], ["help", command]] {
                let r = try CLITests.run(args)
                #expect(r.status == 0 && r.out.hasPrefix("usage:\n  healthgate \(command)"), "\(args): \(r.status) \(r.out) \(r.err)")
            }
        }
        let replay = try CLITests.run(["help", "replay"])
        #expect(
            replay.out.contains("replay FILE.ndjson") && replay.out.contains("replay --journal") && !replay.out.contains("healthgate serve")
        )
        let unknown = try CLITests.run(["help", "sreve"])
        #expect(unknown.status == 2 && unknown.err.contains("did you mean \"serve\"?"), "\(unknown.err)")
        #expect(try CLITests.run(["help"]).out.contains("healthgate forget SINK"))
    }

    /// Issue 47: `replay --journal` on a data dir no phone has written to said "opendir …: No
    /// such file or directory" and exited 1; there is simply nothing to replay.
    @Test func replayOnAFreshDataDirSaysThereIsNothing() throws {
        let dir = ServeProcess.makeTempDir("fresh")
        let r = try CLITests.run(["replay", "--journal"], cwd: dir)
        #expect(r.status == 0 && r.out.contains("is empty (no request stored yet): nothing to replay"), "\(r.status) \(r.out) \(r.err)")
    }

    /// Issue 47's pairing traps: `link` run from another directory made a new data dir and a
    /// token no serve knew; `init` then replaced the token of the phone just paired; a `.local`
    /// name that does not resolve gave no warning. Now only `serve` makes credentials, the other
    /// commands say which config and data dir they used, `init` keeps what serve made.
    @Test func pairingNeverMintsOrReplacesCredentials() throws {
        let dir = ServeProcess.makeTempDir("pair")
        let elsewhere = ServeProcess.makeTempDir("elsewhere")
        let env = ["HEALTHGATE_LISTEN": "127.0.0.1:0"]
        // From a directory no serve ran in: refused, nothing made.
        let lost = try CLITests.run(["link"], cwd: elsewhere, env: env)
        #expect(
            lost.status == 2 && lost.err.contains("no gateway runs from here: \(elsewhere)/healthgate-data/credentials does not exist"),
            "\(lost.err)")
        #expect(lost.err.contains("no credentials were made") && !FileManager.default.fileExists(atPath: elsewhere + "/healthgate-data"))
        for command in [["status"], ["write", "steps", "1", "--at", "2026-10-14T07:00:00Z"]] {
            let r = try CLITests.run(command, cwd: elsewhere, env: env)
            #expect(r.status == 2 && r.err.contains("no gateway runs from here"), "\(command): \(r.err)")
        }
        // check looks at the embedded default without making anything.
        #expect(try CLITests.run(["check"], cwd: elsewhere, env: env).status == 0)
        #expect(!FileManager.default.fileExists(atPath: elsewhere + "/healthgate-data"))

        // serve makes them; link, from serve's directory, finds them and says where it looked.
        let serve = try ServeProcess(arguments: ["serve"], cwd: dir, environment: env)
        let link = try CLITests.run(["link", "--host", "10.0.0.7"], cwd: dir, env: env)
        serve.stop()
        #expect(
            link.status == 0 && link.err.contains("healthgate link: config (embedded default), data dir \(dir)/healthgate-data"),
            "\(link.err)")
        let token = try #require(link.out.split(separator: "&").first { $0.hasPrefix("token=") }.map { String($0.dropFirst(6)) })
        let secret = try #require(
            link.out.split(separator: "&").first { $0.hasPrefix("hmac=") }.map {
                String($0.dropFirst(5)).trimmingCharacters(in: .whitespacesAndNewlines)
            })

        // init writes a config with the token and secret the paired phone uses.
        let i = try CLITests.run(["init"], cwd: dir, env: env)
        #expect(i.status == 0 && i.out.contains("kept the token and secret of ./healthgate-data/credentials"), "\(i.out)")
        let written = try String(contentsOfFile: dir + "/healthgate.yaml", encoding: .utf8)
        #expect(written.contains("token: \"\(token)\"") && written.contains("secret: \"\(secret)\""), "\(written)")
        // Fresh ones only when asked, and then it says what that means.
        let fresh = try CLITests.run(["init", "--force", "--new-credentials"], cwd: dir, env: env)
        #expect(fresh.status == 0 && fresh.out.contains("must be paired again"), "\(fresh.out)")
        #expect(!(try String(contentsOfFile: dir + "/healthgate.yaml", encoding: .utf8)).contains(token))

        // A .local name nothing resolves: said, with this machine's addresses to use instead.
        let name = "nosuch-\(UInt32.random(in: 0...UInt32.max)).local"
        let warned = try CLITests.run(["link", "--host", name], cwd: dir, env: env)
        #expect(
            warned.status == 0 && warned.err.contains("warning: the link names \(name), which does not resolve on this machine"),
            "\(warned.err)")
        #expect(!(try CLITests.run(["link", "--host", "127.0.0.1"], cwd: dir, env: env)).err.contains("warning"))
    }
}
