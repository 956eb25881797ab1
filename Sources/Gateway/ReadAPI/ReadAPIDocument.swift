import FastJSON

/// `GET <prefix>/openapi.json`: the read API described (OpenAPI 3.0), so agents and scripts
/// can find their way. The document is fixed but for the server URL, which is the prefix.
enum ReadAPIDocument {
    static func openAPI(prefix: String) -> [UInt8] {
        var w = JSONWriter(capacity: 8 << 10)
        w.beginObject()
        w.key("openapi"); w.string("3.0.3")
        w.key("info"); w.raw(Array(info.utf8))
        w.key("servers"); w.beginArray(); w.beginObject(); w.key("url"); w.string(prefix); w.endObject(); w.endArray()
        w.key("security"); w.raw(Array(#"[{"bearer":[]}]"#.utf8))
        w.key("paths"); w.raw(Array(paths.utf8))
        w.key("components"); w.raw(Array(components.utf8))
        w.endObject()
        return w.bytes
    }

    static let info = #"""
    {"title":"healthgate read API","version":"1","description":"What healthgate's PostgreSQL sink keeps, read back. Times are UTC (RFC 3339); days are the phone's local days. Pages: pass next_cursor back as cursor until it is null (a page may hold fewer than limit rows when its rows are big: read_api.max_answer_bytes). Tokens are read_api.tokens; a token limited to some devices sees only those."}
    """#

    static let paths = #"""
    {
    "/samples":{"get":{"operationId":"samples","summary":"Records as the canonical record shows them, oldest first","parameters":[{"$ref":"#/components/parameters/device"},{"name":"type","in":"query","schema":{"type":"string","pattern":"^[a-z0-9_]{1,100}$"},"description":"e.g. heart_rate"},{"name":"kind","in":"query","schema":{"type":"string","pattern":"^[a-z0-9_]{1,100}$"},"description":"quantity, category, workout, …"},{"$ref":"#/components/parameters/from"},{"$ref":"#/components/parameters/to"},{"$ref":"#/components/parameters/limit"},{"$ref":"#/components/parameters/cursor"}],"responses":{"200":{"description":"A page of records","content":{"application/json":{"schema":{"$ref":"#/components/schemas/SamplePage"}}}},"400":{"$ref":"#/components/responses/problem"},"401":{"$ref":"#/components/responses/problem"},"403":{"$ref":"#/components/responses/problem"},"503":{"$ref":"#/components/responses/unavailable"}}}},
    "/workouts":{"get":{"operationId":"workouts","summary":"Workouts with duration, energy, distance and the heart rate measured during them","parameters":[{"$ref":"#/components/parameters/device"},{"$ref":"#/components/parameters/from"},{"$ref":"#/components/parameters/to"},{"$ref":"#/components/parameters/limit"},{"$ref":"#/components/parameters/cursor"}],"responses":{"200":{"description":"A page of workouts","content":{"application/json":{"schema":{"$ref":"#/components/schemas/WorkoutPage"}}}},"400":{"$ref":"#/components/responses/problem"},"401":{"$ref":"#/components/responses/problem"},"403":{"$ref":"#/components/responses/problem"},"503":{"$ref":"#/components/responses/unavailable"}}}},
    "/daily":{"get":{"operationId":"daily","summary":"Per local day: the total of a cumulative type (steps), the mean of the others (heart_rate)","parameters":[{"$ref":"#/components/parameters/device"},{"name":"type","in":"query","schema":{"type":"string","pattern":"^[a-z0-9_]{1,100}$","default":"steps"}},{"name":"from","in":"query","schema":{"type":"string","format":"date"},"description":"first local day, YYYY-MM-DD"},{"name":"to","in":"query","schema":{"type":"string","format":"date"},"description":"last local day, YYYY-MM-DD"},{"$ref":"#/components/parameters/limit"},{"$ref":"#/components/parameters/cursor"}],"responses":{"200":{"description":"A page of days","content":{"application/json":{"schema":{"$ref":"#/components/schemas/DayPage"}}}},"400":{"$ref":"#/components/responses/problem"},"401":{"$ref":"#/components/responses/problem"},"403":{"$ref":"#/components/responses/problem"},"503":{"$ref":"#/components/responses/unavailable"}}}},
    "/latest":{"get":{"operationId":"latest","summary":"The newest value of every type, per device","parameters":[{"$ref":"#/components/parameters/device"},{"$ref":"#/components/parameters/limit"},{"$ref":"#/components/parameters/cursor"}],"responses":{"200":{"description":"The newest values","content":{"application/json":{"schema":{"$ref":"#/components/schemas/LatestPage"}}}},"400":{"$ref":"#/components/responses/problem"},"401":{"$ref":"#/components/responses/problem"},"403":{"$ref":"#/components/responses/problem"},"503":{"$ref":"#/components/responses/unavailable"}}}},
    "/batches":{"get":{"operationId":"batches","summary":"Recent requests the receivers answered, newest first: what was stored, set aside and recognised as sent before","parameters":[{"$ref":"#/components/parameters/device"},{"$ref":"#/components/parameters/limit"},{"$ref":"#/components/parameters/cursor"}],"responses":{"200":{"description":"A page of requests","content":{"application/json":{"schema":{"$ref":"#/components/schemas/BatchPage"}}}},"400":{"$ref":"#/components/responses/problem"},"401":{"$ref":"#/components/responses/problem"},"403":{"$ref":"#/components/responses/problem"},"503":{"$ref":"#/components/responses/unavailable"}}}}
    }
    """#

    static let components = #"""
    {
    "securitySchemes":{"bearer":{"type":"http","scheme":"bearer","description":"A read_api token"}},
    "parameters":{
      "device":{"name":"device","in":"query","schema":{"type":"string","minLength":1,"maxLength":128},"description":"One device; by default every device the token may read"},
      "from":{"name":"from","in":"query","schema":{"type":"string"},"description":"From this time on (RFC 3339, or YYYY-MM-DD for midnight UTC)"},
      "to":{"name":"to","in":"query","schema":{"type":"string"},"description":"Before this time (RFC 3339, or YYYY-MM-DD)"},
      "limit":{"name":"limit","in":"query","schema":{"type":"integer","minimum":1,"default":100},"description":"Rows per page, capped at read_api.max_limit"},
      "cursor":{"name":"cursor","in":"query","schema":{"type":"string","minLength":1},"description":"next_cursor of the page before"}},
    "responses":{
      "problem":{"description":"What was wrong","content":{"application/problem+json":{"schema":{"$ref":"#/components/schemas/Problem"}}}},
      "unavailable":{"description":"The database cannot be read now","headers":{"Retry-After":{"schema":{"type":"integer"}}},"content":{"application/problem+json":{"schema":{"$ref":"#/components/schemas/Problem"}}}}},
    "schemas":{
      "Problem":{"type":"object","required":["title","status","detail"],"properties":{"type":{"type":"string"},"title":{"type":"string"},"status":{"type":"integer"},"detail":{"type":"string"}}},
      "Source":{"type":"object","properties":{"app":{"type":"string"},"device":{"type":"string"}}},
      "Record":{"type":"object","required":["op","kind","device","receiver","uuid","type"],"properties":{"op":{"type":"string"},"kind":{"type":"string"},"device":{"type":"string"},"receiver":{"type":"string"},"uuid":{"type":"string"},"type":{"type":"string"},"part":{"type":"integer"},"parts":{"type":"integer"},"start":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},"utc_offset":{"type":"string","pattern":"^[+-][0-9]{2}:[0-9]{2}$","description":"the phone's offset from UTC then, e.g. +01:00"},"value":{"oneOf":[{"type":"number"},{"type":"string"}]},"unit":{"type":"string"},"code":{"type":"integer"},"activity":{"type":"string"},"duration_s":{"type":"number"},"energy_kcal":{"type":"number"},"distance_m":{"type":"number"},"source":{"$ref":"#/components/schemas/Source"},"metadata":{},"tags":{"type":"object","additionalProperties":{"type":"string"}},"extra":{"type":"object"}},"additionalProperties":true},
      "Workout":{"type":"object","required":["device","uuid","heart_rate"],"properties":{"device":{"type":"string"},"uuid":{"type":"string"},"activity":{"type":"string"},"start":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},"duration_s":{"type":"number"},"energy_kcal":{"type":"number"},"distance_m":{"type":"number"},"source":{"$ref":"#/components/schemas/Source"},"day":{"type":"string","format":"date"},"heart_rate":{"type":"object","required":["samples"],"properties":{"avg_bpm":{"type":"number"},"max_bpm":{"type":"number"},"samples":{"type":"integer"}}}}},
      "Day":{"type":"object","required":["device","day","type","how","samples"],"properties":{"device":{"type":"string"},"day":{"type":"string","format":"date"},"type":{"type":"string"},"how":{"type":"string","enum":["sum","mean"]},"value":{"type":"number"},"min":{"type":"number"},"max":{"type":"number"},"samples":{"type":"integer"},"unit":{"type":"string"}}},
      "Latest":{"type":"object","required":["device","type"],"properties":{"device":{"type":"string"},"type":{"type":"string"},"value":{"oneOf":[{"type":"number"},{"type":"string"}]},"unit":{"type":"string"},"start":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},"source":{"$ref":"#/components/schemas/Source"}}},
      "Batch":{"type":"object","required":["id","time","receiver","status","records","refused","duplicates"],"properties":{"id":{"type":"integer"},"time":{"type":"string","format":"date-time"},"receiver":{"type":"string"},"device":{"type":"string"},"request_id":{"type":"string"},"status":{"type":"integer"},"records":{"type":"integer","description":"records stored"},"refused":{"type":"integer","description":"records set aside as bad (quarantine)"},"duplicates":{"type":"integer","description":"records of a request stored whole before (a HealthSync export sent again)"},"note":{"type":"string"}}},
      "BatchPage":{"type":"object","required":["data","limit","next_cursor"],"properties":{"data":{"type":"array","items":{"$ref":"#/components/schemas/Batch"}},"limit":{"type":"integer"},"next_cursor":{"type":"string","nullable":true}}},
      "SamplePage":{"type":"object","required":["data","limit","next_cursor"],"properties":{"data":{"type":"array","items":{"$ref":"#/components/schemas/Record"}},"limit":{"type":"integer"},"next_cursor":{"type":"string","nullable":true}}},
      "WorkoutPage":{"type":"object","required":["data","limit","next_cursor"],"properties":{"data":{"type":"array","items":{"$ref":"#/components/schemas/Workout"}},"limit":{"type":"integer"},"next_cursor":{"type":"string","nullable":true}}},
      "DayPage":{"type":"object","required":["data","limit","next_cursor"],"properties":{"data":{"type":"array","items":{"$ref":"#/components/schemas/Day"}},"limit":{"type":"integer"},"next_cursor":{"type":"string","nullable":true}}},
      "LatestPage":{"type":"object","required":["data","limit","next_cursor"],"properties":{"data":{"type":"array","items":{"$ref":"#/components/schemas/Latest"}},"limit":{"type":"integer"},"next_cursor":{"type":"string","nullable":true}}}}
    }
    """#
}
