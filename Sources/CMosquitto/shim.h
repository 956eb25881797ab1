#ifndef HG_CMOSQUITTO_SHIM_H
#define HG_CMOSQUITTO_SHIM_H
/* libmosquitto (Debian libmosquitto-dev), for the MQTT sink. */
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
