// Parser: Jinja source -> syntax tree (jinja_ast.h), following the grammar
// and operator precedence of Jinja2's parser.
#pragma once

#include <memory>
#include <string>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"

namespace pc::jinja {

// Throws ChatTemplateError ("line L, column C: message") on syntax errors.
std::unique_ptr<Template> parse_template(const std::string& source, const LexOptions& opts = {});

}  // namespace pc::jinja
