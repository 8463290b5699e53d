// The request inspector's page (docs/inspector.md): frontdoor/openai/inspect_page.html,
// compiled into the router (CMake writes it into a generated source), so that the router
// serves it with no files beside it and no network beyond itself.
#pragma once

#include <string_view>

namespace baton::frontdoor {

std::string_view InspectPageHtml();

// What /inspect answers with: the page may run its own inline script and style, and
// fetch only from the router that served it.
inline constexpr std::string_view kInspectContentSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'";

}  // namespace baton::frontdoor
