//! One field table per model: [`wire_model!`] takes a model's fields once (its Rust and Python
//! name, what kind of value it holds, and its wire name) and derives from that table the
//! struct, its decoder, the list of `(field, wire name)` pairs (`FIELDS`, which the Python
//! package reads for `to_dict()` of models built by hand and checks its dataclasses against),
//! and a walk over the values (`visit`, with which the bindings fill the dataclasses). A new
//! field is one line of its table (and its annotation on the Python dataclass, which a test
//! holds to the table).

use chrono::{DateTime, FixedOffset};
use jiter::Peek;

use super::decode_error::DecodeError;
use super::json::{Reader, Scalar};
use super::{parse_timestamp, BusinessPhoneNumber, FromWire};

/// A field's value as the bindings see it, by kind.
pub enum FieldRef<'a> {
    Text(Option<&'a str>),
    Scalar(Option<&'a Scalar>),
    Timestamp(Option<&'a DateTime<FixedOffset>>),
    PhoneNumbers(&'a [BusinessPhoneNumber]),
}

/// A kind of field: how it is read, what a decoded model holds, and how it is seen.
pub trait FieldKind {
    /// What the model holds once decoded.
    type Value;
    /// What decoding holds while the object is read (a field may be absent).
    type Slot: Default;

    /// Reads the value the reader is at into `slot`; `wire` is the field's wire name.
    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        wire: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()>;

    /// The model's value once the object was read; `snippet` shows the object in an error.
    fn finish(
        slot: Self::Slot,
        what: &str,
        wire: &str,
        snippet: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value>;

    fn view(value: &Self::Value) -> FieldRef<'_>;
}

/// Optional text (a number or a bool is kept as its JSON text).
pub enum Text {}
/// Text that must be there: an object without it cannot be used (an id).
pub enum Required {}
/// A string, number or bool, kept as the service wrote it.
pub enum AnyScalar {}
/// A timestamp: parsed when it can be, else absent (its text stays in the raw JSON).
pub enum Timestamp {}
/// A list of business phone numbers (null or absent: empty).
pub enum PhoneNumbers {}

impl FieldKind for Text {
    type Value = Option<String>;
    type Slot = Option<String>;

    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        _: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()> {
        *slot = reader.text(what)?;
        Ok(())
    }

    fn finish(
        slot: Self::Slot,
        _: &str,
        _: &str,
        _: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value> {
        Ok(slot)
    }

    fn view(value: &Self::Value) -> FieldRef<'_> {
        FieldRef::Text(value.as_deref())
    }
}

impl FieldKind for Required {
    type Value = String;
    type Slot = Option<String>;

    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        _: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()> {
        *slot = reader.text(what)?;
        Ok(())
    }

    fn finish(
        slot: Self::Slot,
        what: &str,
        wire: &str,
        snippet: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value> {
        slot.ok_or_else(|| DecodeError {
            message: format!("{what} has no usable \"{wire}\" field"),
            snippet: snippet(),
        })
    }

    fn view(value: &Self::Value) -> FieldRef<'_> {
        FieldRef::Text(Some(value))
    }
}

impl FieldKind for AnyScalar {
    type Value = Option<Scalar>;
    type Slot = Option<Scalar>;

    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        _: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()> {
        *slot = reader.scalar(what)?;
        Ok(())
    }

    fn finish(
        slot: Self::Slot,
        _: &str,
        _: &str,
        _: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value> {
        Ok(slot)
    }

    fn view(value: &Self::Value) -> FieldRef<'_> {
        FieldRef::Scalar(value.as_ref())
    }
}

impl FieldKind for Timestamp {
    type Value = Option<DateTime<FixedOffset>>;
    type Slot = Option<DateTime<FixedOffset>>;

    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        _: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()> {
        *slot = reader.text(what)?.as_deref().and_then(parse_timestamp);
        Ok(())
    }

    fn finish(
        slot: Self::Slot,
        _: &str,
        _: &str,
        _: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value> {
        Ok(slot)
    }

    fn view(value: &Self::Value) -> FieldRef<'_> {
        FieldRef::Timestamp(value.as_ref())
    }
}

impl FieldKind for PhoneNumbers {
    type Value = Vec<BusinessPhoneNumber>;
    type Slot = Vec<BusinessPhoneNumber>;

    fn read(
        reader: &mut Reader<'_>,
        what: &str,
        wire: &str,
        slot: &mut Self::Slot,
    ) -> crate::wire::DecodeResult<()> {
        *slot = objects(reader, what, wire)?;
        Ok(())
    }

    fn finish(
        slot: Self::Slot,
        _: &str,
        _: &str,
        _: &dyn Fn() -> String,
    ) -> crate::wire::DecodeResult<Self::Value> {
        Ok(slot)
    }

    fn view(value: &Self::Value) -> FieldRef<'_> {
        FieldRef::PhoneNumbers(value)
    }
}

/// A list of objects of `T` (null or absent: empty).
pub(crate) fn objects<T: FromWire>(
    reader: &mut Reader<'_>,
    what: &str,
    field: &str,
) -> crate::wire::DecodeResult<Vec<T>> {
    match reader.peek(what)? {
        Peek::Null => {
            reader.skip(what)?;
            return Ok(Vec::new());
        }
        Peek::Array => {}
        _ => {
            let start = reader.position();
            reader.skip(what)?;
            return Err(DecodeError {
                message: format!("{what}: {field} is not an array"),
                snippet: reader.raw_since(start).snippet(),
            });
        }
    }
    let mut items = Vec::new();
    let mut next = reader
        .jiter
        .known_array()
        .map_err(|e| reader.error(what, e))?;
    while let Some(peek) = next {
        if peek != Peek::Object {
            let start = reader.position();
            reader.skip(what)?;
            return Err(DecodeError {
                message: format!("{field} holds something that is not a {}", T::NAME),
                snippet: reader.raw_since(start).snippet(),
            });
        }
        items.push(T::read(reader)?);
        next = reader
            .jiter
            .array_step()
            .map_err(|e| reader.error(what, e))?;
    }
    Ok(items)
}

/// A model decoded from a field table (see the module's doc).
pub trait WireModel {
    /// `(field, wire name)` of every field, in the spec's order.
    const FIELDS: &'static [(&'static str, &'static str)];

    /// Each field's value, in the order of [`WireModel::FIELDS`].
    fn visit<E>(&self, f: impl FnMut(usize, FieldRef<'_>) -> Result<(), E>) -> Result<(), E>;
}

/// Declares a model by its field table: `field: Kind = "wireName"`, in the spec's order.
/// Besides the fields, the struct has `wire` (the object's text) and the `extra` fields given
/// after the table, each with its starting value, which `after` may set once the object is read.
macro_rules! wire_model {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $what:literal {
            $( $(#[$field_meta:meta])* $field:ident : $kind:ty = $wire:literal ),+ $(,)?
        }
        $( extra { $( $(#[$extra_meta:meta])* $extra:ident : $extra_ty:ty = $extra_init:expr ),* $(,)? } )?
        $( after |$model:ident| $after:block )?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: <$kind as $crate::wire::model::FieldKind>::Value, )+
            $( $( $(#[$extra_meta])* pub $extra: $extra_ty, )* )?
            /// The text of the object it was decoded from.
            pub wire: $crate::wire::RawJson,
        }

        impl $crate::wire::model::WireModel for $name {
            const FIELDS: &'static [(&'static str, &'static str)] = &[$( (stringify!($field), $wire) ),+];

            fn visit<E>(
                &self,
                mut f: impl FnMut(usize, $crate::wire::model::FieldRef<'_>) -> Result<(), E>,
            ) -> Result<(), E> {
                let mut index = 0;
                $(
                    f(index, <$kind as $crate::wire::model::FieldKind>::view(&self.$field))?;
                    index += 1;
                )+
                let _ = index;
                Ok(())
            }
        }

        impl $crate::wire::FromWire for $name {
            const NAME: &'static str = $what;

            fn wire(&self) -> &$crate::wire::RawJson {
                &self.wire
            }

            fn read(reader: &mut $crate::wire::Reader<'_>) -> $crate::wire::DecodeResult<Self> {
                use $crate::wire::model::FieldKind;
                #[allow(non_camel_case_types)]
                #[derive(Clone, Copy)]
                enum Field { $( $field, )+ Other }
                #[allow(non_snake_case)]
                #[derive(Default)]
                struct Slots { $( $field: <$kind as FieldKind>::Slot, )+ }
                let field = |wire_name: &str| match wire_name {
                    $( $wire => Field::$field, )+
                    _ => Field::Other,
                };
                let what = $what;
                let start = reader.start(what)?;
                let mut slots = Slots::default();
                let mut key = reader.object(what, field)?;
                while let Some(found) = key {
                    match found {
                        $( Field::$field => <$kind>::read(reader, what, $wire, &mut slots.$field)?, )+
                        Field::Other => reader.skip(what)?,
                    }
                    key = reader.key(what, field)?;
                }
                let wire = reader.raw_since(start);
                let snippet = || wire.snippet();
                #[allow(unused_mut)]
                let mut model = $name {
                    $( $field: <$kind>::finish(slots.$field, what, $wire, &snippet)?, )+
                    $( $( $extra: $extra_init, )* )?
                    wire,
                };
                $( { let $model = &mut model; $after } )?
                Ok(model)
            }
        }
    };
}

pub(crate) use wire_model;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::{BusinessAccount, SendResult};

    /// Every field of the table is decoded from its wire name and visited in the table's
    /// order, under its own name.
    #[test]
    fn a_table_decodes_and_visits_every_field_by_its_wire_name() {
        let mut object = serde_json::Map::new();
        for (index, (_, wire)) in BusinessPhoneNumber::FIELDS.iter().enumerate() {
            let value = if wire.ends_with("Time") {
                format!("2024-03-0{}T10:15:30Z", index % 9 + 1)
            } else {
                format!("v{index}")
            };
            object.insert((*wire).to_owned(), serde_json::Value::String(value));
        }
        let text = serde_json::to_vec(&object).unwrap();
        let number = BusinessPhoneNumber::from_json(text.into()).unwrap();
        let mut seen = Vec::new();
        number
            .visit(|index, value| {
                let shown = match value {
                    FieldRef::Text(text) => text.unwrap_or_default().to_owned(),
                    FieldRef::Timestamp(time) => time.unwrap().format("%d").to_string(),
                    _ => String::new(),
                };
                seen.push((index, shown));
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(seen.len(), BusinessPhoneNumber::FIELDS.len());
        for (index, shown) in seen {
            let expected = if BusinessPhoneNumber::FIELDS[index].1.ends_with("Time") {
                format!("0{}", index % 9 + 1)
            } else {
                format!("v{index}")
            };
            assert_eq!(shown, expected, "field {index}");
        }
        assert_eq!(
            BusinessAccount::FIELDS.first(),
            Some(&("biz_account_id", "bizAccountId"))
        );
        assert_eq!(
            SendResult::FIELDS
                .iter()
                .map(|(_, w)| *w)
                .collect::<Vec<_>>(),
            ["smsId", "status", "code", "msg"]
        );
    }

    #[test]
    fn a_required_field_that_is_missing_is_a_decode_error_naming_it() {
        let error = BusinessPhoneNumber::from_json(br#"{"status": "CONNECTED"}"#.to_vec().into())
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"phoneNumberId\""), "{error}");
    }
}
