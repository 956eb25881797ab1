#ifndef YAMLCONFIG_CYAML_SHIM_H
#define YAMLCONFIG_CYAML_SHIM_H

/* libyaml's event parser (yaml_parser_*) is used from Swift directly: none of the
 * functions YAMLConfig calls is variadic, so no wrappers are needed here. */
#include <yaml.h>

#endif
