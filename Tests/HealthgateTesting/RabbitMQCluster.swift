import Foundation
import Glibc
import Posix

/// Debian's RabbitMQ (3.10) as a cluster of `nodes` nodes on loopback: its own node names,
/// ports, data dirs, cookie and epmd port in a temporary dir, formed at boot (classic peer
/// discovery), stopped — epmd too — when the test is done. A node can be killed (SIGKILL of its
/// Erlang VM, as a crash), frozen (SIGSTOP: cut off from its peers and clients) and started
/// again on the same name and disk, where it rejoins. (`package`: `make bench` starts one too.)
package final class RabbitMQCluster {
    struct Node {
        let name: String
        let port: UInt16
        let distPort: UInt16
        let dir: String
    }

    static let bin = "/usr/lib/rabbitmq/bin"
    let dir: String
    let nodes: [Node]
    let user = "healthgate"
    let password: String
    let epmdPort: UInt16
    /// Each node's start script (it runs the VM as its child and reaps it).
    private var scripts: [Int: pid_t] = [:]

    /// The URL of node `i` (with the password: for the tests' own configs).
    package func url(_ i: Int) -> String { "amqp://\(user):\(password)@127.0.0.1:\(nodes[i].port)/%2f" }

    package init(nodes count: Int = 3) throws {
        guard FileManager.default.isExecutableFile(atPath: RabbitMQCluster.bin + "/rabbitmq-server") else {
            throw ServeError(description: "no RabbitMQ at \(RabbitMQCluster.bin): run `make test` (it installs rabbitmq-server)")
        }
        let dir = ServeProcess.makeTempDir("rabbitmq")
        self.dir = dir
        password = "pw" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        epmdPort = ScriptedEndpoint.freePort()
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        nodes = (0..<count).map { i in
            Node(
                name: "hg\(tag)\(i)@localhost", port: ScriptedEndpoint.freePort(), distPort: ScriptedEndpoint.freePort(),
                dir: "\(dir)/n\(i)")
        }
        // The cookie every node and the CLI share (a node makes its own when there is none, and
        // then the nodes cannot cluster).
        let cookie = dir + "/.erlang.cookie"
        try Array("hg\(tag)cookie".utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: cookie)) }
        chmod(cookie, 0o400)
        for node in nodes {
            try FileManager.default.createDirectory(atPath: node.dir + "/conf.d", withIntermediateDirectories: true)
            let peers = nodes.enumerated().map { "cluster_formation.classic_config.nodes.\($0.offset + 1) = \($0.element.name)" }
            try """
            listeners.tcp.1 = 127.0.0.1:\(node.port)
            default_user = \(user)
            default_pass = \(password)
            loopback_users = none
            cluster_partition_handling = pause_minority
            distribution.listener.interface = 127.0.0.1
            raft.wal_max_size_bytes = 32000000
            vm_memory_high_watermark.absolute = 512MiB
            disk_free_limit.absolute = 50MB
            heartbeat = 10
            cluster_formation.peer_discovery_backend = classic_config
            \(count > 1 ? peers.joined(separator: "\n") : "")

            """.write(toFile: node.dir + "/rabbitmq.conf", atomically: true, encoding: .utf8)
            try "[{kernel,[{net_ticktime,10}]}].\n".write(toFile: node.dir + "/advanced.config", atomically: true, encoding: .utf8)
        }
        RabbitMQCluster.stopAtExit(dir: dir, nodes: count, epmdPort: epmdPort)
        for i in nodes.indices { try start(i) }
        for i in nodes.indices { try waitUntilUp(i, seconds: 120) }
        if count > 1 {
            let (rc, out) = try ctl(0, ["await_online_nodes", "\(count)", "--timeout", "60"], timeout: 90)
            guard rc == 0 else { throw ServeError(description: "RabbitMQ nodes did not form a cluster: \(out)") }
        }
    }

    /// The clusters to stop when the test process ends: a suite's shared cluster is never
    /// deinitialized.
    private static let atExit = Locked<[(dir: String, nodes: Int, epmdPort: UInt16)]>([])

    private static func stopAtExit(dir: String, nodes: Int, epmdPort: UInt16) {
        let first = atExit.withLock { list in
            list.append((dir, nodes, epmdPort))
            return list.count == 1
        }
        guard first else { return }
        atexit {
            for c in RabbitMQCluster.atExit.withLock({ $0 }) {
                for i in 0..<c.nodes {
                    let pid = (try? String(contentsOfFile: "\(c.dir)/n\(i)/pid", encoding: .utf8)).flatMap {
                        Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
                    }
                    if let pid { Glibc.kill(pid, SIGKILL) }
                }
                // epmd refuses to go while it still lists a node: the VMs just killed take a moment.
                RabbitMQCluster.stopEPMD(port: c.epmdPort)
            }
        }
    }

    /// Stops the cluster's own epmd, which refuses while it still lists a node (the VMs just
    /// killed take a moment to drop out of it).
    static func stopEPMD(port: UInt16) {
        for _ in 0..<25 {
            if system("ERL_EPMD_PORT=\(port) /usr/bin/epmd -kill 2>&1 | grep -q Killed") == 0 { return }
            usleep(200_000)
        }
    }

    deinit {
        for i in nodes.indices { kill(i) }
        RabbitMQCluster.stopEPMD(port: epmdPort)
        try? FileManager.default.removeItem(atPath: dir)
    }

    private var environment: [String: String] {
        [
            "HOME": dir, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "ERL_EPMD_PORT": "\(epmdPort)", "ERL_EPMD_ADDRESS": "127.0.0.1",
            "LANG": "C.UTF-8"
        ]
    }

    private func environment(_ node: Node) -> [String: String] {
        environment.merging(
            [
                "RABBITMQ_NODENAME": node.name, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": "\(node.port)",
                "RABBITMQ_DIST_PORT": "\(node.distPort)", "RABBITMQ_MNESIA_BASE": node.dir + "/db",
                "RABBITMQ_LOG_BASE": node.dir + "/log", "RABBITMQ_LOGS": "-", "RABBITMQ_CONFIG_FILE": node.dir + "/rabbitmq.conf",
                "RABBITMQ_ADVANCED_CONFIG_FILE": node.dir + "/advanced.config", "RABBITMQ_CONFIG_FILES": node.dir + "/conf.d",
                "RABBITMQ_CONF_ENV_FILE": node.dir + "/none", "RABBITMQ_ENABLED_PLUGINS_FILE": node.dir + "/enabled_plugins",
                "RABBITMQ_PID_FILE": node.dir + "/pid",
                // No busy-waiting schedulers: three nodes share the tests' two cores.
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none"
            ], uniquingKeysWith: { $1 })
    }

    /// Starts node `i` (its script runs the Erlang VM as a child). Spawned with no signal
    /// blocked: a child of Foundation's `Process` inherits the test runner's mask, SIGCHLD
    /// included, and the script then never reaps its killed VM nor exits.
    func start(_ i: Int) throws {
        let node = nodes[i]
        unlink(node.dir + "/pid")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, node.dir + "/server.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        // Its own process group, as `Process` makes: a signal to the tests' group misses it.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let executable = RabbitMQCluster.bin + "/rabbitmq-server"
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment(node).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw ServeError(description: "cannot start \(executable): \(String(cString: strerror(rc)))") }
        scripts[i] = pid
    }

    /// Whether node `i`'s script still runs (reaping it once it ended).
    func isRunning(_ i: Int) -> Bool {
        guard let pid = scripts[i] else { return false }
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Waits until node `i` takes AMQP logins.
    func waitUntilUp(_ i: Int, seconds: Double = 90) throws {
        var running = true
        let up = ServeProcess.eventually(seconds) {
            running = isRunning(i)
            guard running else { return true }
            return DatabaseProcess.listens(pid: vmPID(i) ?? -1, port: nodes[i].port)
        }
        guard up, running else {
            let log = (try? String(contentsOfFile: nodes[i].dir + "/server.log", encoding: .utf8)) ?? ""
            throw ServeError(description: "RabbitMQ node \(nodes[i].name) did not start: \(log.suffix(3000))")
        }
    }

    /// The pid of node `i`'s Erlang VM (the script's child: a SIGKILL of the script leaves it running).
    func vmPID(_ i: Int) -> Int32? {
        (try? String(contentsOfFile: nodes[i].dir + "/pid", encoding: .utf8)).flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// Kills node `i` as a crash does (SIGKILL of its VM), and waits for it to be gone.
    func kill(_ i: Int) {
        if let pid = vmPID(i) { Glibc.kill(pid, SIGKILL) }
        if let pid = scripts[i] {
            if !ServeProcess.eventually(30, { !isRunning(i) }) {
                Glibc.kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
        }
        scripts[i] = nil
    }

    /// Kills `nodes`, runs `body`, then starts again those it left down and waits until they
    /// are up (also when it throws), so that the next test finds the whole cluster.
    func withNodesDown<R>(_ nodes: [Int], _ body: () throws -> R) throws -> R {
        for n in nodes { kill(n) }
        defer {
            for n in nodes where !isRunning(n) { try? start(n) }
            for n in nodes { try? waitUntilUp(n) }
        }
        return try body()
    }

    /// Freezes node `i` (SIGSTOP): its peers and clients see it silent, as when cut off.
    func freeze(_ i: Int) { if let pid = vmPID(i) { Glibc.kill(pid, SIGSTOP) } }
    func thaw(_ i: Int) { if let pid = vmPID(i) { Glibc.kill(pid, SIGCONT) } }

    /// `rabbitmqctl -n <node i> ARGS`: its exit status and output.
    @discardableResult
    func ctl(_ i: Int, _ arguments: [String], timeout: Double = 60) throws -> (Int32, String) {
        try Command.run(
            RabbitMQCluster.bin + "/rabbitmqctl", ["-n", nodes[i].name] + arguments, environment: environment, timeout: timeout)
    }
}
