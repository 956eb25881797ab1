/// Syncky native samples of every shape: plain quantities and categories, and samples with
/// fields of their kind, sources, metadata and hostile strings (`recorded`).
enum SampleShapes {
    static let t = #""start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:59Z""#
    static let src = #""source":{"app":"com.apple.Health","device":"Apple Watch"}"#

    /// Plain quantities and categories, with every form of time a sender writes.
    static let plain: [String] = [
        #"{"uuid":"5E1D0000-0000-4000-8000-000000000001","type":"steps","value":412,"unit":"count",\#(t),\#(src)}"#,
        #"{"uuid":"h1","type":"heart_rate","value":72.5,"unit":"count/min","start":"2026-10-14T07:01:00.250Z","end":"2026-10-14T07:01:00.5Z"}"#,
        // Times not in the canonical text: offsets, t/z/space, a leap second, trailing zeros, more than nine digits.
        #"{"uuid":"o1","type":"steps","value":1,"start":"2026-10-14T09:01:00+02:00","end":"2026-10-14T01:31:00-05:30"}"#,
        #"{"uuid":"o2","type":"steps","value":2,"start":"2026-10-14t07:01:00z","end":"2026-10-14 07:01:59Z"}"#,
        #"{"uuid":"o3","type":"steps","value":3,"start":"2026-12-31T23:59:60Z","end":"2027-01-01T00:00:00.500Z"}"#,
        #"{"uuid":"o4","type":"steps","value":4,"start":"2026-10-14T07:01:00.000Z","end":"2026-10-14T07:01:00.123456789123Z"}"#,
        #"{"uuid":"o5","type":"steps","value":5,"start":"2026-10-14T07:01:00.000000001Z","end":"2026-10-14T07:01:00.1Z"}"#,
        // An instant: no end, it ends when it starts.
        #"{"uuid":"i1","type":"heart_rate","value":61,"unit":"count/min","start":"2026-10-14T07:01:00+01:00"}"#,
        #"{"uuid":"i2","type":"heart_rate","value":62,"start":"2026-10-14T07:01:00.25Z","end":null}"#,
        // Hostile text wherever a string goes, an unknown type and unit.
        #"{"uuid":"q\"uo\\te\u0001\n\t é 🫀 \u2028","type":"my \"custom\"\\type\u001f","value":-0.0,"unit":"furlongs/fortnight é",\#(t),"source":{"app":"a\"p\\p\u0000","device":"Ø \u007f"}}"#,
        #"{"uuid":"s1","type":"steps","value":1,\#(t),"source":{}}"#,
        #"{"uuid":"s2","type":"steps","value":1,\#(t),"source":{"app":"only"}}"#,
        #"{"uuid":"s3","type":"steps","value":1,\#(t),"source":{"device":"only"}}"#,
        #"{"uuid":"s4","type":"steps","value":1,\#(t),"source":{"app":7,"device":"Watch"}}"#,
        #"{"uuid":"s5","type":"steps","value":1,\#(t),"source":null,"metadata":null,"unit":null}"#,
        #"{"uuid":"m1","type":"steps","value":1,\#(t),"metadata":{"HKWasUserEntered":true,"n":[1e300,-0.0,0.1,12345678901234567890,-3],"s":"é\"\\\u0002","o":{}}}"#,
        #"{"uuid":"m2","type":"steps","value":1,\#(t),"metadata":["a",{"b":null}]}"#,
        #"{"uuid":"m3","type":"steps","value":1,\#(t),"metadata":"text"}"#,
        #"{"uuid":"c1","type":"sleep_analysis","value":"asleep_core",\#(t),\#(src)}"#,
        #"{"uuid":"c2","type":"sleep_analysis","value":"napping \"é\"",\#(t)}"#,
        #"{"uuid":"c3","type":"my_category","value":"x","unit":"count",\#(t)}"#,
        #"{"uuid":"p1","type":"steps","value":1,\#(t),"part":0,"parts":3}"#,
        #"{"uuid":"n1","type":"steps","value":1e308,\#(t)}"#,
        #"{"uuid":"n2","type":"steps","value":12345678901234567890,\#(t)}"#,
        #"{"uuid":"n3","type":"steps","value":9007199254740993,\#(t)}"#,
        #"{"uuid":"n4","type":"active_energy_burned","value":0.1,"unit":"kcal",\#(t)}"#,
        #"{"uuid":"n5","type":"body_mass","value":72.5,"unit":"kg",\#(t)}"#,
        #"{"uuid":"n6","type":"steps","value":-5e-324,\#(t)}"#
    ]

    /// Samples that are made into records first.
    static let recorded: [String] = [
        #"{"uuid":"r1","type":"body_mass","value":160,"unit":"lb",\#(t)}"#, // converted to kg
        #"{"uuid":"r2","type":"steps","value":1,\#(t),"foo":{"bar":1}}"#, // kept under extra
        #"{"uuid":"r3","type":"steps","value":1,\#(t),"source":{"app":"a","version":"17.1"}}"#,
        #"{"uuid":"r4","type":"steps","value":1,\#(t),"source":"Apple Watch"}"#,
        #"{"uuid":"r5","type":"steps","value":1,\#(t),"activity":"walk","duration_s":59}"#,
        #"{"uuid":"r6","type":"workout","activity":"running",\#(t),"duration_s":1870,"energy_kcal":312.4,"distance_m":5020,"metadata":{}}"#,
        #"{"uuid":"r7","type":"state_of_mind","start":"2026-10-14T07:00:00Z","kind":"daily_mood","valence":0.4}"#,
        #"{"uuid":"characteristic:blood_type","type":"characteristic","name":"blood_type","value":"a_positive"}"#
    ]
}
