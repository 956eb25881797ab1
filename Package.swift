// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
    name: "healthgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "healthgate", targets: ["healthgate"]),
    ],
    targets: [
        // Debian C libraries as system-library targets.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CSQLite3", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CLinux"),   // glibc declarations missing from the Glibc module (header only)
        .target(
            name: "CSimdJSON",
            cxxSettings: [.define("SIMDJSON_THREADS_ENABLED", to: "1"), .unsafeFlags(["-O3"])],
            linkerSettings: [.linkedLibrary("simdjson")]
        ),

        // The core: canonical record, protocols, time. No C imports, no I/O.
        .target(name: "HealthgateCore", swiftSettings: strict),
        // POSIX file and thread helpers shared by the gateway and the sinks.
        .target(name: "Posix", dependencies: ["HealthgateCore"], swiftSettings: strict),
        // JSON reading (simdjson) and writing.
        .target(name: "FastJSON", dependencies: ["CSimdJSON"], swiftSettings: strict),
        // YAML (libyaml) into Decodable types, with located errors.
        .target(name: "YAMLConfig", dependencies: ["CYAML"], swiftSettings: strict),
        // SQLite, for the write-back commands and the sinks' indexes.
        .target(name: "Storage", dependencies: ["CSQLite3"], swiftSettings: strict),
        // HMAC-SHA256, constant-time comparison and random secrets over libcrypto.
        .target(name: "HealthgateCrypto", dependencies: ["CCrypto"], swiftSettings: strict),
        // The canonical record as NDJSON: the journal payload, the file sink's lines, replay's input.
        .target(name: "CanonicalJSON", dependencies: ["HealthgateCore", "FastJSON"], swiftSettings: strict),
        .target(name: "Transforms", dependencies: ["HealthgateCore", "YAMLConfig"], swiftSettings: strict),
        .target(name: "Sinks", dependencies: ["HealthgateCore", "Posix", "CanonicalJSON", "YAMLConfig", "CCurl", "HealthgateCrypto", "CZlib", "Storage"],
                exclude: ["InfluxDB/README.md"], swiftSettings: strict),
        .target(
            name: "Gateway",
            dependencies: ["HealthgateCore", "Posix", "FastJSON", "CanonicalJSON", "YAMLConfig", "Transforms", "Sinks",
                           "CMicroHTTPD", "HealthgateCrypto", "CZlib", "CLinux", "CQREncode", "Storage"],
            exclude: ["Journal/JOURNAL.md", "Pipeline/QUEUES.md"],
            swiftSettings: strict
        ),
        .executableTarget(name: "healthgate", dependencies: ["Gateway"], swiftSettings: strict),
        .executableTarget(name: "healthgate-bench", dependencies: ["Gateway", "CanonicalJSON", "FastJSON", "Posix", "HealthgateCrypto"], path: "Sources/Bench", swiftSettings: strict),

        .testTarget(name: "HealthgateCoreTests", dependencies: ["HealthgateCore"], swiftSettings: strict),
        .testTarget(name: "FastJSONTests", dependencies: ["FastJSON"], swiftSettings: strict),
        .testTarget(name: "YAMLConfigTests", dependencies: ["YAMLConfig"], swiftSettings: strict),
        .testTarget(name: "GatewayTests", dependencies: ["Gateway", "Posix", "CanonicalJSON", "Sinks", "Transforms", "HealthgateCrypto", "CZlib"],
                    swiftSettings: strict),
    ],
    cxxLanguageStandard: .cxx17
)
