/**
 * The type a niclab dashboard must satisfy, from @grafana/schema: the dashboard as Grafana's
 * schema types it, each panel with the options and field config of its own plugin (the four
 * panel types the dashboards use), and every enum as the strings a JSON file holds.
 */
import type { Dashboard, FieldConfigSource, Panel } from '@grafana/schema';
import type * as TimeSeries from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';
import type * as Table from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type * as Stat from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type * as StateTimeline from '@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen';

/** A type as JSON holds it: a string enum's members as their strings, the rest as it is. */
export type AsJson<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T : T extends readonly (infer U)[] ? AsJson<U>[] : T extends object ? { [K in keyof T]: AsJson<T[K]> } : T;

/**
 * What Grafana fills from its defaults when a dashboard leaves it out: the schema types a
 * panel's options and field config, and a link, as Grafana holds them after loading, every
 * field there; a file may give only those it changes. Keys stay checked: one the type does not
 * have is an error, and so is a value of the wrong type.
 */
export type Defaulted<T> = T extends readonly (infer U)[] ? Defaulted<U>[] : T extends object ? { [K in keyof T]?: Defaulted<T[K]> } : T;

type Typed<Type extends string, Options, Custom> = Omit<Panel, 'type' | 'options' | 'fieldConfig'> & { type: Type; options?: Defaulted<Options>; fieldConfig?: Defaulted<FieldConfigSource<Custom>> };

export type NiclabPanel =
  | Typed<'timeseries', TimeSeries.Options, TimeSeries.FieldConfig>
  | Typed<'table', Table.Options, Table.FieldConfig>
  | Typed<'stat', Stat.Options, Record<string, never>>
  | Typed<'state-timeline', StateTimeline.Options, StateTimeline.FieldConfig>;

export type NiclabDashboard = AsJson<Omit<Dashboard, 'panels' | 'links'> & { panels: NiclabPanel[]; links?: Defaulted<NonNullable<Dashboard['links']>> }>;
