import FastJSON
import HealthgateCore
import CanonicalJSON

/// Syncky's CSV body (guide section 4): one header row, then one row per sample, deletion or
/// characteristic, times with their own offset (converted to UTC, the offset kept).
enum SynckyCSV {
    static let header = ["type", "uuid", "start", "end", "value", "unit", "value_name", "source", "device", "user_entered"]

    static func read(_ body: [UInt8], receiver: String, device: String) -> Reception {
        var bytes = body
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) } // a UTF-8 byte order mark
        let rows: [CSVReader.Row]
        do {
            rows = try CSVReader.rows(bytes)
        } catch {
            return .unreadable(status: 400, reason: "the body is not valid CSV: \(error)")
        }
        guard let first = rows.first else {
            return .unreadable(status: 400, reason: "the body is empty: a Syncky CSV body starts with its header row")
        }
        guard first.fields == header else {
            return .unreadable(
                status: 400,
                reason: "the first row is not Syncky's header row (type,uuid,start,end,value,unit,value_name,source,device,user_entered)")
        }
        var batch = ReceivedBatch()
        batch.reserve(records: rows.count - 1)
        for row in rows.dropFirst() {
            switch record(row, receiver: receiver, device: device) {
            case .success(let r): batch.append(r)
            case .failure(let q): batch.quarantined.append(q)
            }
        }
        return .accept(batch, reply: HTTPResponse(status: 200))
    }

    static func raw(_ row: CSVReader.Row) -> RawJSON {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("line"); w.int(row.line)
        w.key("fields")
        w.beginArray()
        for f in row.fields { w.string(f) }
        w.endArray()
        w.endObject()
        return RawJSON(encoded: w.bytes)
    }

    /// Undoes the spreadsheet formula guard: a `'` put before `=`, `+`, `-`, `@`, a tab or a CR.
    static func unguard(_ s: String) -> String {
        guard s.hasPrefix("'"), let next = s.unicodeScalars.dropFirst().first,
            ["=", "+", "-", "@", "\t", "\r"].contains(next)
        else { return s }
        return String(s.dropFirst())
    }

    static func record(_ row: CSVReader.Row, receiver: String, device: String) -> SynckyNative.Mapped {
        func bad(_ reason: String) -> SynckyNative.Mapped {
            .failure(QuarantinedRecord(reason: "line \(row.line): \(reason)", raw: raw(row)))
        }
        guard !row.invalidUTF8 else { return bad("the row is not valid UTF-8") }
        guard row.fields.count == header.count else {
            return bad("\(row.fields.count) fields; a row has \(header.count)")
        }
        let f = row.fields
        let (type, uuid, startText, endText, valueText, unit, valueName) = (f[0], f[1], f[2], f[3], f[4], f[5], f[6])
        let app = unguard(f[7]), sourceDevice = unguard(f[8]), userEntered = f[9]
        guard !type.isEmpty else { return bad("the row has no type") }
        guard !uuid.isEmpty else { return bad("the row has no uuid") }
        if valueName == "deleted" && startText.isEmpty {
            return .success(
                CanonicalRecord(
                    op: .delete, kind: RecordKind.kind(ofType: type), device: device,
                    receiver: receiver, uuid: uuid, type: type))
        }
        var r = CanonicalRecord(kind: RecordKind.kind(ofType: type), device: device, receiver: receiver, uuid: uuid, type: type)
        if !app.isEmpty || !sourceDevice.isEmpty {
            r.source = RecordSource(app: app.isEmpty ? nil : app, device: sourceDevice.isEmpty ? nil : sourceDevice)
        }
        if !userEntered.isEmpty {
            guard userEntered == "true" || userEntered == "false" else {
                return bad("user_entered is \(QuarantinedRecord.describe(userEntered)), not true or false")
            }
            r.extra.append(RecordField("user_entered", .bool(userEntered == "true")))
        }
        if type == "characteristic" {
            r.kind = RecordKind.characteristic
            let name = uuid.hasPrefix("characteristic:") ? String(uuid.dropFirst("characteristic:".count)) : uuid
            r.addKindField("name", .string(name))
            if !valueName.isEmpty {
                r.value = .string(valueName)
                r.code = Int(valueText)
            } else {
                r.value = .string(valueText) // a date characteristic puts the date in value
            }
            return .success(r)
        }
        for (text, isStart) in [(startText, true), (endText, false)] where !text.isEmpty {
            guard let (t, offset) = Timestamp.parseRFC3339(text) else {
                return bad("\(isStart ? "start" : "end") is not an RFC 3339 time (\(QuarantinedRecord.describe(text)))")
            }
            if isStart { r.start = t; r.utcOffset = offset } else { r.end = t }
        }
        guard r.start != nil else { return bad("the row has no start time") }
        if let a = r.start, let b = r.end, b < a { return bad("end is before start") }
        if type == "workout" {
            r.kind = RecordKind.workout
            r.activity = valueName.isEmpty ? nil : valueName
            guard let d = Double(valueText) else {
                return bad("a workout's value is its duration in seconds, not \(QuarantinedRecord.describe(valueText))")
            }
            r.durationS = d
            return .success(r)
        }
        if !valueName.isEmpty {
            r.kind = RecordKind.category
            r.value = .string(valueName)
            guard let code = Int(valueText) else {
                return bad("a category's value is its HealthKit number, not \(QuarantinedRecord.describe(valueText))")
            }
            r.code = code
            return .success(r)
        }
        r.kind = RecordKind.quantity
        guard let v = Double(valueText), v.isFinite else { return bad("value is not a number (\(QuarantinedRecord.describe(valueText)))") }
        r.value = .number(v)
        r.unit = unit.isEmpty ? nil : unit
        return .success(r)
    }
}
