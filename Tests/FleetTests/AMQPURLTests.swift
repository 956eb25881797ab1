import Fleet
import Testing

@Suite struct AMQPURLTests {
    @Test func theFleetURLsOfTheDesignParse() throws {
        let u = try AMQPURL("amqp://healthgate:s%40cret@rmq1:5672/%2f")
        #expect(u == AMQPURL(tls: false, host: "rmq1", port: 5672, user: "healthgate", password: "s@cret", vhost: "/"))
        #expect(try AMQPURL("amqp://rmq2").vhost == "/")
        #expect(try AMQPURL("amqp://rmq2").user == "guest")
        #expect(try AMQPURL("amqps://u:p@broker.example/prod").port == 5671)
        #expect(try AMQPURL("amqps://u:p@broker.example/prod").vhost == "prod")
        #expect(try AMQPURL("amqp://u:p@[::1]:5673/%2f").host == "::1")
        #expect(try AMQPURL("amqp://u:p@[::1]:5673/%2f").port == 5673)
    }

    @Test func whatIsNoBrokerURLIsRefusedWithoutShowingThePassword() {
        for bad in [
            "http://u:hunter2@h/", "amqp://u:hunter2@:5672/", "amqp://u:hunter2@h:0/", "amqp://u:hunter2@h:99999/",
            "amqp://u:hunter2@h/a/b", "amqp://u:hunter2@h/?heartbeat=5", "amqp://u:hunter2@h/%zz", "amqp://u:hunter2@[::1/"
        ] {
            #expect {
                _ = try AMQPURL(bad)
            } throws: { error in
                let text = "\(error)"
                return text.contains("not an AMQP URL") && !text.contains("hunter2")
            }
        }
    }

    @Test func aShownURLHidesThePassword() throws {
        let u = try AMQPURL("amqp://healthgate:hunter2@rmq1/%2f")
        #expect(u.shown == "amqp://healthgate:***@rmq1:5672/%2f")
    }
}
