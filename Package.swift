// swift-tools-version:6.0
import PackageDescription

// Warnings are errors. Exclusivity (no overlapping access to one variable) is checked at run
// time in debug builds — every test run, the sanitizers' too — and statically in all; a release
// build leaves out the run-time check (~3 % of the server's CPU under load: a check at each
// access to a class's property or a captured variable on the hot path).
let strict: [SwiftSetting] = [
    .unsafeFlags(["-warnings-as-errors"]),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
]

let package = Package(
    name: "healthgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "healthgate", targets: ["healthgate"]),
        .executable(name: "healthgate-fuzz", targets: ["healthgate-fuzz"])
    ],
    targets: [
        // Debian C libraries as system-library targets.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CDeflate", pkgConfig: "libdeflate", providers: [.apt(["libdeflate-dev"])]),
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CSQLite3", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CRabbitMQ", pkgConfig: "librabbitmq", providers: [.apt(["librabbitmq-dev"])]),
        .systemLibrary(name: "CWebSockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "CLinux"), // glibc declarations missing from the Glibc module (header only)
        .target(
            name: "CSimdJSON",
            cxxSettings: [.define("SIMDJSON_THREADS_ENABLED", to: "1"), .unsafeFlags(["-O3"])],
            linkerSettings: [.linkedLibrary("simdjson")]
        ),

        // The core: canonical record, Receiver/Transform protocols, time, the type registry. No C, no I/O.
        .target(name: "HealthgateCore", swiftSettings: strict),
        // POSIX files, threads, monitor, clocks, the tz database, the stderr log sink.
        .target(name: "Posix", dependencies: ["HealthgateCore", "CLinux"], swiftSettings: strict),
        // JSON reading (simdjson) and writing.
        .target(name: "FastJSON", dependencies: ["CSimdJSON"], swiftSettings: strict),
        // YAML (libyaml) into Decodable types, with located errors.
        .target(name: "YAMLConfig", dependencies: ["CYAML"], swiftSettings: strict),
        // SQLite, for the write-back commands and the sinks' indexes.
        .target(name: "Storage", dependencies: ["CSQLite3"], swiftSettings: strict),
        // HMAC-SHA256, constant-time comparison and random secrets over libcrypto.
        .target(name: "HealthgateCrypto", dependencies: ["CCrypto"], swiftSettings: strict),
        // The canonical line: the one reader and writer of the record as NDJSON (LINE.md), and a
        // request's lines as the journal takes them.
        .target(name: "CanonicalJSON", dependencies: ["HealthgateCore", "FastJSON"], exclude: ["LINE.md"], swiftSettings: strict),

        // The sink framework: the Sink protocol and its lifecycle, batch/retry/queue config,
        // outcomes, their classification and the halving that finds a refused record. No C.
        .target(name: "SinkKit", dependencies: ["HealthgateCore", "CanonicalJSON", "YAMLConfig"], swiftSettings: strict),
        // HTTP for sinks over libcurl: the client and the batch poster.
        .target(name: "HTTPDelivery", dependencies: ["SinkKit", "HealthgateCore", "CCurl"], swiftSettings: strict),
        // One target per sink, linking only what it needs; `Sinks` registers them.
        .target(
            name: "SinkFile", dependencies: ["SinkKit", "HealthgateCore", "Posix", "CanonicalJSON", "YAMLConfig", "HealthgateCrypto"],
            path: "Sources/Sinks/File", swiftSettings: strict),
        .target(
            name: "SinkHTTP",
            dependencies: ["SinkKit", "HTTPDelivery", "HealthgateCore", "Posix", "CanonicalJSON", "HealthgateCrypto", "YAMLConfig"],
            path: "Sources/Sinks/HTTP", swiftSettings: strict),
        .target(
            name: "SinkInfluxDB",
            dependencies: [
                "SinkKit", "HTTPDelivery", "HealthgateCore", "Posix", "CanonicalJSON", "FastJSON", "Storage",
                "HealthgateCrypto", "CDeflate", "YAMLConfig"
            ],
            path: "Sources/Sinks/InfluxDB", exclude: ["README.md"], swiftSettings: strict),
        // Home Assistant over MQTT: entity model and states, the libmosquitto client, the sink.
        .target(
            name: "SinkMQTT",
            dependencies: [
                "SinkKit", "HealthgateCore", "Posix", "CanonicalJSON", "FastJSON", "YAMLConfig", "CMosquitto",
                "HealthgateCrypto"
            ],
            path: "Sources/Sinks/MQTT", swiftSettings: strict),
        // Home Assistant's long-term statistics over its websocket API (libwebsockets).
        .target(
            name: "SinkHomeAssistant",
            dependencies: ["SinkKit", "HealthgateCore", "Posix", "CanonicalJSON", "FastJSON", "YAMLConfig", "CWebSockets"],
            path: "Sources/Sinks/HomeAssistant", swiftSettings: strict),
        .target(
            name: "SinkPostgres", dependencies: ["SinkKit", "HealthgateCore", "Posix", "FastJSON", "YAMLConfig", "CPQ"],
            path: "Sources/Sinks/Postgres", swiftSettings: strict),
        .target(
            name: "Sinks",
            dependencies: [
                "SinkKit", "SinkFile", "SinkHTTP", "SinkHomeAssistant", "SinkInfluxDB", "SinkMQTT", "SinkPostgres", "YAMLConfig"
            ],
            path: "Sources/Sinks/Registry", swiftSettings: strict),
        // One folder per transform, and their registry.
        .target(
            name: "Transforms", dependencies: ["HealthgateCore", "YAMLConfig", "Posix", "FastJSON", "CanonicalJSON"], swiftSettings: strict),
        // The journal and the pipeline: drainers, routes, delivery, dead letters, cursors. No HTTP, no QR.
        .target(
            name: "Pipeline", dependencies: ["HealthgateCore", "Posix", "CanonicalJSON", "FastJSON", "SinkKit", "Transforms", "CDeflate"],
            exclude: ["Journal/JOURNAL.md", "Delivery/QUEUES.md"], swiftSettings: strict),
        // More than one machine: the AMQP client (rabbitmq-c), partitions, the ingest publisher
        // and the delivery workers of `serve --role`.
        .target(
            name: "Fleet",
            dependencies: [
                "HealthgateCore", "Posix", "CanonicalJSON", "CRabbitMQ", "Pipeline", "SinkKit", "SinkPostgres", "HealthgateCrypto"
            ], swiftSettings: strict),
        // HTTP server, receivers and formats, ingest, write-back, config, the CLI.
        .target(
            name: "Gateway",
            dependencies: [
                "HealthgateCore", "Posix", "FastJSON", "CanonicalJSON", "YAMLConfig", "Transforms", "SinkKit", "Sinks",
                "Pipeline", "CMicroHTTPD", "HealthgateCrypto", "CZlib", "CLinux", "CQREncode", "Storage",
                "SinkPostgres", "Fleet"
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "healthgate", dependencies: ["Gateway", "HealthgateCore"], swiftSettings: strict, plugins: ["BuildStamp"]),
        // The commit and day a build is made from, for `healthgate version` (Plugins/BuildStamp).
        .plugin(name: "BuildStamp", capability: .buildTool()),
        .executableTarget(
            name: "healthgate-bench",
            dependencies: [
                "Gateway", "Pipeline", "CanonicalJSON", "FastJSON", "Posix", "HealthgateCrypto",
                "SinkKit", "SinkMQTT", "SinkPostgres", "SinkInfluxDB", "HTTPDelivery", "Fleet", "HealthgateTesting"
            ],
            path: "Sources/Bench", swiftSettings: strict),

        // The fuzz targets: a library the tests run the committed corpora through, and its
        // driver, libFuzzer's when built for `make fuzz`.
        .target(
            name: "FuzzTargets",
            dependencies: ["Gateway", "Pipeline", "HealthgateCore", "CanonicalJSON", "FastJSON", "HealthgateCrypto", "YAMLConfig"],
            path: "Sources/Fuzz/Targets", swiftSettings: strict),
        .executableTarget(name: "healthgate-fuzz", dependencies: ["FuzzTargets"], path: "Sources/Fuzz/Driver", swiftSettings: strict),

        // Test doubles: scripted endpoint, real server processes, the fake clock, test transforms.
        .target(
            name: "HealthgateTesting",
            dependencies: [
                "Gateway", "Pipeline", "SinkKit", "HTTPDelivery", "SinkMQTT", "HealthgateCore", "Posix",
                "YAMLConfig", "Transforms"
            ],
            path: "Tests/HealthgateTesting", swiftSettings: strict),
        // `healthgate` with the test transforms registered, for tests that kill a real serve.
        .executableTarget(
            name: "healthgate-testserve", dependencies: ["Gateway", "HealthgateTesting"],
            path: "Tests/TestServe", swiftSettings: strict),

        .testTarget(name: "HealthgateCoreTests", dependencies: ["HealthgateCore"], swiftSettings: strict),
        .testTarget(name: "FastJSONTests", dependencies: ["FastJSON"], swiftSettings: strict),
        .testTarget(name: "YAMLConfigTests", dependencies: ["YAMLConfig"], swiftSettings: strict),
        // The journal, built and tested without the HTTP server.
        .testTarget(name: "PipelineTests", dependencies: ["Pipeline", "Posix", "HealthgateCore"], swiftSettings: strict),
        // The fleet against a real RabbitMQ cluster on loopback.
        .testTarget(
            name: "FleetTests",
            dependencies: [
                "Fleet", "HealthgateTesting", "Posix", "CanonicalJSON", "HealthgateCore", "Pipeline", "SinkKit", "HealthgateCrypto"
            ],
            swiftSettings: strict),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway", "Pipeline", "SinkKit", "Sinks", "SinkFile", "SinkHTTP", "SinkInfluxDB", "SinkMQTT", "SinkHomeAssistant",
                "SinkPostgres",
                "HTTPDelivery", "HealthgateTesting", "Posix", "CanonicalJSON", "Transforms",
                "HealthgateCrypto", "CZlib", "YAMLConfig", "FuzzTargets"
            ],
            swiftSettings: strict)
    ],
    cxxLanguageStandard: .cxx17
)
