@testable import HealthgateTesting
@testable import Pipeline
import SinkKit

/// The worked examples of the Syncky guide (sections 4, 6 and 10): real requests whose
/// signatures verify. Copied byte for byte.
enum Vectors {
    static let token = "vec_token_N_2Y13AA1iajwMKegGliR7uA-JPcykkrnx_oquTiDU0"
    static let secret = "whsec_mgHtkTuuLB_wsJa221vi031K8GmN9QbtPNq_RV8uD8c"
    static let destination = "wh_hmf4Hk2wv-D-TUbXkl-UCA"
    /// A Syncky receiver named `phone` on /hook with the guide's token and secret, as one line
    /// of a config's `receivers:` (indented by two).
    static let phoneReceiver = "  phone: {kind: syncky, path: /hook, auth: {type: bearer, token: \(token)}, hmac: {secret: \(secret)}}"

    /// Section 4: the native Check connection request, signed at 1791961500.
    static let checkBody =
        #"{"v":1,"type":"sync","device":"d_zsOZnTQUz_juWFVljuOOBQ","samples":[],"deleted":[],"acks":[],"more":false,"delivery":{"destination":"wh_hmf4Hk2wv-D-TUbXkl-UCA","id":"01a1393a-8960-7b26-8ec7-5d0493cc3337","index":0,"count":1,"sent_at":"2026-10-14T07:05:00Z","test":true}}"#
    static let checkTimestamp = "1791961500"
    static let checkSignature = "v1=b5d4f350a4455a39d6e89cfb3e24d4b96fa4a47b7437b985fd8e8ad26c1baf3c"
    static let checkDelivery = "01a1393a-8960-7b26-8ec7-5d0493cc3337"

    static var checkHeaders: [(String, String)] {
        [
            ("Content-Type", "application/json"), ("User-Agent", "Syncky/1.0"), ("X-Syncky-Format", "native"),
            ("X-Syncky-Delivery", checkDelivery), ("X-Syncky-Destination", destination),
            ("X-Syncky-Timestamp", checkTimestamp), ("X-Syncky-Signature", checkSignature),
            ("Authorization", "Bearer \(token)")
        ]
    }

    /// Section 10: the results request, signed at 1791961953.
    static let resultsBody =
        #"{"v":1,"type":"results","results":[{"command_id":"c_1","version":1,"status":"applied"},{"command_id":"c_2","version":1,"status":"rejected","reason":"type_not_allowed"}]}"#
    static let resultsTimestamp = "1791961953"
    static let resultsSignature = "v1=faf090fb6106803f7435919ab1383d8b52256a0d4b86e99d22b110a9d6e32132"

    /// Section 10: reply signatures.
    static let commandsBody =
        #"{"v":1,"type":"commands","commands":[{"command_id":"c_1","version":1,"op":"write","type":"dietary_water","value":0.25,"unit":"L","start":"2026-10-14T07:00:00Z","end":"2026-10-14T07:00:00Z"},{"command_id":"c_2","version":1,"op":"write","type":"apple_exercise_time","value":30,"unit":"min","start":"2026-10-14T07:00:00Z","end":"2026-10-14T07:00:00Z"}]}"#
    static let commandsDelivery = "01a13940-fe30-7630-9d7f-9da6e6de1e3d"
    static let commandsSignature = "t=1791961923,v1=73d9d986299402060d48ffe640a17e657067e1a9e853ccdd3136c5e74a5163f5"
    static let deleteBody = #"{"v":1,"type":"commands","commands":[{"command_id":"c_1","version":2,"op":"delete","type":"dietary_water"}]}"#
    static let deleteDelivery = "01a13977-ecb0-7fbd-bd2a-03d2ebe40d71"
    static let deleteSignature = "t=1791965523,v1=42e6daf6d840b6ffbbb1b9e81c2f94c525743082b26f4eca1a7cec1034e68c40"

    /// Section 4: one sample of each shown kind, from one real request.
    static let stepsSample =
        #"{"uuid": "5E1D0000-0000-4000-8000-000000000001", "type": "steps", "value": 412, "unit": "count", "start": "2026-10-14T07:01:00Z", "end": "2026-10-14T07:01:59Z", "source": {"app": "com.apple.Health", "device": "Apple Watch"}}"#
    static let sleepSample =
        #"{"uuid": "51EE0000-0000-4000-8000-000000000001", "type": "sleep_analysis", "value": "asleep_core", "start": "2026-10-13T23:10:00Z", "end": "2026-10-14T00:40:00Z", "source": {"app": "com.apple.Health", "device": "Apple Watch"}}"#
    static let workoutSample =
        #"{"uuid": "0B6F0000-0000-4000-8000-000000000001", "type": "workout", "activity": "running", "start": "2026-10-14T05:00:00Z", "end": "2026-10-14T05:31:10Z", "duration_s": 1870, "energy_kcal": 312.4, "distance_m": 5020, "location": "unknown", "metadata": {}, "events": [], "activities": [], "statistics": [], "source": {"app": "com.apple.Health", "device": "Apple Watch"}}"#
    static let characteristicSample =
        #"{"uuid": "characteristic:blood_type", "type": "characteristic", "name": "blood_type", "value": "a_positive"}"#
    static let heartbeatSample =
        #"{"uuid": "0E0B0000-0000-4000-8000-000000000001", "type": "heartbeat_series", "start": "2026-10-14T06:00:00Z", "end": "2026-10-14T06:01:00Z", "count": 6, "part": 0, "parts": 1, "beats": [[0, 0], [842, 0], [1677, 0], [2519, 1], [3350, 0], [4188, 0]], "source": {"app": "com.apple.Health", "device": "Apple Watch"}}"#
    static let deletion = #"{"uuid": "5E1D0000-0000-4000-8000-000000000099", "type": "steps"}"#

    /// A native data body around samples and deletions.
    static func syncBody(
        device: String = "d_zsOZnTQUz_juWFVljuOOBQ", samples: [String], deleted: [String] = [],
        delivery: String = "01a1393a-8960-7b26-8ec7-5d0493cc3399"
    ) -> String {
        #"{"v":1,"type":"sync","device":"\#(device)","samples":[\#(samples.joined(separator: ","))],"deleted":[\#(deleted.joined(separator: ","))],"acks":[],"more":false,"delivery":{"destination":"wh_hmf4Hk2wv-D-TUbXkl-UCA","id":"\#(delivery)","index":0,"count":1,"sent_at":"2026-10-14T07:05:00Z"}}"#
    }
}
