//! An input item of a campaign as a validated message (`prepare`), and the last template
//! validated, reused while the next items share it.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString};

use crate::api::validate_template;
use crate::campaign::{not_a_message, EncodedTemplate, Prepared};
use crate::error::Error;
use crate::python::args::{text, type_name};
use crate::python::convert;
use crate::python::message_fields::MessageFields;

/// The last template a `feed` validated, to reuse while the next items share it (a campaign's
/// messages usually do): validating and encoding it again was a large part of the Python
/// thread's work per message.
pub(super) struct SharedTemplate {
    /// The name, parameters and language read from the template, compared by identity.
    parts: [Py<PyAny>; 3],
    parameters: Kept,
    validated: Result<EncodedTemplate, Error>,
    /// The `bizmsg.Template` the parts were read from. It is frozen, so while the next items
    /// carry this very object its parts are these, and reading them again is skipped.
    template: Option<Py<PyAny>>,
}

/// How parameters read when the template was validated are compared with a later read, beyond
/// being the same object.
enum Kept {
    /// Text: immutable, identity is enough.
    Text,
    /// A shallow copy of a list or a dict, compared by value: the same object may have been
    /// changed in place since.
    Copy(Py<PyAny>),
}

impl Kept {
    /// Whether `parameters`, the object kept from, still equals what was kept.
    fn unchanged(&self, py: Python<'_>, parameters: &Bound<'_, PyAny>) -> bool {
        match self {
            Kept::Text => true,
            Kept::Copy(copy) => copy.bind(py).eq(parameters).unwrap_or(false),
        }
    }

    /// `None` for parameters of another type, whose validation is never reused.
    fn of(parameters: &Bound<'_, PyAny>) -> Option<Self> {
        if parameters.cast::<PyString>().is_ok() {
            Some(Kept::Text)
        } else if let Ok(list) = parameters.cast::<PyList>() {
            Some(Kept::Copy(
                list.get_slice(0, list.len()).into_any().unbind(),
            ))
        } else if let Ok(dict) = parameters.cast::<PyDict>() {
            dict.copy()
                .ok()
                .map(|copy| Kept::Copy(copy.into_any().unbind()))
        } else {
            None
        }
    }
}

impl SharedTemplate {
    /// The validation to reuse when `template` is the `Template` validated last, with its
    /// parameters unchanged; `None` when its parts must be read.
    fn reused_for(
        &self,
        py: Python<'_>,
        template: &Bound<'_, PyAny>,
    ) -> Option<Result<EncodedTemplate, Error>> {
        let same = self.template.as_ref()?.bind(py).is(template)
            && self.parameters.unchanged(py, self.parts[1].bind(py));
        same.then(|| self.validated.clone())
    }

    /// Whether `parts`, just read from a template, are the ones validated, unchanged.
    fn matches(&self, py: Python<'_>, parts: &TemplateParts<'_>) -> bool {
        let (name, parameters, language) = parts;
        let [cached_name, cached_parameters, cached_language] = &self.parts;
        cached_name.bind(py).is(name)
            && cached_parameters.bind(py).is(parameters)
            && cached_language.bind(py).is(language)
            && self.parameters.unchanged(py, parameters)
    }
}

/// The template made of `parts` validated, from `cache` when it holds these parts unchanged.
fn shared_template(
    cache: &mut Option<SharedTemplate>,
    py: Python<'_>,
    template: &Bound<'_, PyAny>,
    parts: TemplateParts<'_>,
) -> Result<EncodedTemplate, Error> {
    if let Some(shared) = cache.as_ref().filter(|shared| shared.matches(py, &parts)) {
        return shared.validated.clone();
    }
    let (name, parameters, language) = parts;
    let validated = (|| {
        EncodedTemplate::new(validate_template(
            &text("template.name", &name)?,
            &convert::py_to_value("template.parameters", &parameters)?,
            &text("template.language", &language)?,
        )?)
    })();
    *cache = Kept::of(&parameters).map(|kept| SharedTemplate {
        parts: [name.unbind(), parameters.unbind(), language.unbind()],
        parameters: kept,
        validated: validated.clone(),
        template: convert::is_template(py, template).then(|| template.clone().unbind()),
    });
    validated
}

/// An input item as a validated message, or why it is not one. `shared` carries the last
/// template validated by this `feed`.
pub(super) fn prepare<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
    shared: &mut Option<SharedTemplate>,
) -> Result<Prepared, Error> {
    let message = item
        .cast::<MessageFields>()
        .ok()
        .and_then(|message| message.try_borrow().ok());
    let (to, from, template, key) = if let Some(fields) = message {
        // A `Message`: its fields are read from the Rust object, not through `getattr`.
        (
            Some(fields.to.bind(py).clone()),
            Some(fields.from.bind(py).clone()),
            Some(fields.template.bind(py).clone()),
            Some(fields.idempotency_key.bind(py).clone()),
        )
    } else if let Ok(mapping) = item.cast::<PyMapping>() {
        let get = |name: &str| mapping.get_item(name).ok();
        let template = match get("template") {
            Some(template) => Some(template),
            // Flat: name, parameters and language beside to and from.
            None => Some(mapping.clone().into_any()),
        };
        (
            get("to"),
            get("from").or_else(|| get("from_")),
            template,
            get("idempotency_key"),
        )
    } else {
        return Err(not_a_message(&type_name(item)));
    };
    let required = |value: Option<Bound<'py, PyAny>>, field: &str| {
        value
            .filter(|value| !value.is_none())
            .ok_or_else(|| Error::validation(field, "is missing"))
    };
    let template = required(template, "template")?;
    let source = match shared
        .as_ref()
        .and_then(|shared| shared.reused_for(py, &template))
    {
        Some(validated) => TemplateSource::Reused(validated),
        None => TemplateSource::Read(template_parts(py, &template)?),
    };
    let to = text("to", &required(to, "to")?)?;
    let from = text("from_", &required(from, "from_")?)?;
    let key = match key.filter(|key| !key.is_none()) {
        Some(key) => Some(text("idempotency_key", &key)?),
        None => None,
    };
    let template = match source {
        TemplateSource::Reused(validated) => validated,
        TemplateSource::Read(parts) => shared_template(shared, py, &template, parts),
    };
    Prepared::with_template(&to, &from, template, key)
}

/// Where a message's template comes from: the validation of the same `Template` just before
/// it, or its parts, read to be validated (or matched with the last ones).
enum TemplateSource<'py> {
    Reused(Result<EncodedTemplate, Error>),
    Read(TemplateParts<'py>),
}

/// A template's `(name, parameters, language)`, as given.
type TemplateParts<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// The parts of a `Template` or of a mapping with those keys.
fn template_parts<'py>(
    py: Python<'py>,
    template: &Bound<'py, PyAny>,
) -> Result<TemplateParts<'py>, Error> {
    // Asked once: a Mapping check of an object that is not a dict goes through the ABC.
    let mapping = template.cast::<PyMapping>().ok();
    let part = |name: &Bound<'py, PyString>, field: &str| -> Result<Bound<'py, PyAny>, Error> {
        let value = match &mapping {
            Some(mapping) => mapping.get_item(name).ok(),
            None => template.getattr(name).ok(),
        };
        value.ok_or_else(|| Error::validation(field, "is missing"))
    };
    Ok((
        part(intern!(py, "name"), "template.name")?,
        part(intern!(py, "parameters"), "template.parameters")?,
        part(intern!(py, "language"), "template.language")?,
    ))
}
