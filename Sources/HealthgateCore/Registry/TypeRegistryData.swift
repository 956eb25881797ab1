// The registry's source of truth: every HealthKit quantity and category type healthgate knows, the workout
// activities and the characteristics, one row per line. `HealthRegistryStore` parses this text once.
// Edit a row here and run `swift test`: the tests check every row against the rules described in the header.

enum TypeRegistryData {
    static let text = """
        # healthgate type registry. One row per line; fields are separated by `|` and trimmed; `-` means "none".
        # Lines starting with `#` are comments. Sources: Apple's HealthKit headers (HKTypeIdentifiers.h, HKCategoryValues.h,
        # HKWorkout.h, HKCharacteristicValues.h; iOS 18 SDK) as summarised in shared/research/health-ecosystem.md §4,
        # Health Auto Export metric names from §1.6, Syncky type names from the Syncky server guide §4, §5, §10.
        #
        # Row kinds:
        #   values         | set name | name[/alias...]=code ...          (a named set of category values, space separated)
        #   quantity       | name | HealthKit identifier | unit | family | aggregation | writable | bounds | HAE names | -
        #   category       | name | HealthKit identifier | -    | -      | aggregation | writable | -      | HAE names | value set
        #   workout        | raw value | name | HAE name
        #   characteristic | name | value set (or - for a date)
        #
        # name: snake_case of the identifier without its prefix (StepCount is `steps`). unit: HealthKit's canonical unit in
        # healthgate's spelling (Units.normalize), except count/min for heart_rate and respiratory_rate; `%` is a fraction 0-1.
        # aggregation: cumulative (values add up) or discrete; categories are discrete (a sample is a state, its code is
        # never summed). writable: yes when a write command may create it. bounds: lo...hi in `unit`, writable quantities only.
        # HAE names: comma separated, the name Health Auto Export sends now first, then older spellings.
        # HAE `blood_pressure` is a correlation of the two blood_pressure_* types and is deliberately not listed.

        # ---- category value sets (HKCategoryValues.h) -------------------------------------------------------------------
        values | not_applicable            | not_applicable=0
        values | sleep_analysis            | in_bed/inbed=0 asleep_unspecified/asleep=1 awake=2 asleep_core/core=3 asleep_deep/deep=4 asleep_rem/rem=5
        values | apple_stand_hour          | stood=0 idle=1
        values | severity                  | unspecified=0 not_present=1 mild=2 moderate=3 severe=4
        values | presence                  | present=0 not_present=1
        values | appetite_changes          | unspecified=0 no_change=1 decreased=2 increased=3
        values | vaginal_bleeding          | unspecified=1 light=2 medium=3 heavy=4 none=5
        values | cervical_mucus            | dry=1 sticky=2 creamy=3 watery=4 egg_white=5
        values | contraceptive             | unspecified=1 implant=2 injection=3 intrauterine_device=4 intravaginal_ring=5 oral=6 patch=7
        values | ovulation_test            | negative=1 luteinizing_hormone_surge/positive=2 indeterminate=3 estrogen_surge=4
        values | test_result               | negative=1 positive=2 indeterminate=3
        values | environmental_audio_event | momentary_limit=1
        values | headphone_audio_event     | seven_day_limit=1
        values | low_cardio_fitness        | low_fitness=1
        values | walking_steadiness_event  | initial_low=1 initial_very_low=2 repeat_low=3 repeat_very_low=4

        # ---- characteristic value sets (HKCharacteristicValues.h) -------------------------------------------------------
        values | biological_sex            | not_set=0 female=1 male=2 other=3
        values | blood_type                | not_set=0 a_positive/a+=1 a_negative/a-=2 b_positive/b+=3 b_negative/b-=4 ab_positive/ab+=5 ab_negative/ab-=6 o_positive/o+=7 o_negative/o-=8
        values | fitzpatrick_skin_type     | not_set=0 i/type_i=1 ii/type_ii=2 iii/type_iii=3 iv/type_iv=4 v/type_v=5 vi/type_vi=6
        values | wheelchair_use            | not_set=0 no=1 yes=2
        values | activity_move_mode        | active_energy=1 apple_move_time=2

        # ---- quantity types: body measurements ---------------------------------------------------------------------------
        quantity | apple_sleeping_wrist_temperature       | HKQuantityTypeIdentifierAppleSleepingWristTemperature      | degC             | temperature   | discrete   | no  | -          | apple_sleeping_wrist_temperature                  | -
        quantity | body_fat_percentage                    | HKQuantityTypeIdentifierBodyFatPercentage                  | %                | fraction      | discrete   | yes | 0.01...0.8 | body_fat_percentage                               | -
        quantity | body_mass                              | HKQuantityTypeIdentifierBodyMass                           | kg               | mass          | discrete   | yes | 0.5...700  | weight_body_mass                                  | -
        quantity | body_mass_index                        | HKQuantityTypeIdentifierBodyMassIndex                      | count            | count         | discrete   | yes | 5...150    | body_mass_index                                   | -
        quantity | electrodermal_activity                 | HKQuantityTypeIdentifierElectrodermalActivity              | S                | conductance   | discrete   | no  | -          | electrodermal_activity                            | -
        quantity | height                                 | HKQuantityTypeIdentifierHeight                             | m                | length        | discrete   | yes | 0.2...3    | height                                            | -
        quantity | lean_body_mass                         | HKQuantityTypeIdentifierLeanBodyMass                       | kg               | mass          | discrete   | yes | 0.5...500  | lean_body_mass                                    | -
        quantity | waist_circumference                    | HKQuantityTypeIdentifierWaistCircumference                 | m                | length        | discrete   | yes | 0.2...3    | waist_circumference                               | -

        # ---- quantity types: fitness ---------------------------------------------------------------------------------------
        quantity | active_energy_burned                   | HKQuantityTypeIdentifierActiveEnergyBurned                 | kcal             | energy        | cumulative | no  | -          | active_energy                                     | -
        quantity | apple_exercise_time                    | HKQuantityTypeIdentifierAppleExerciseTime                  | min              | time          | cumulative | no  | -          | apple_exercise_time                               | -
        quantity | apple_move_time                        | HKQuantityTypeIdentifierAppleMoveTime                      | min              | time          | cumulative | no  | -          | apple_move_time                                   | -
        quantity | apple_stand_time                       | HKQuantityTypeIdentifierAppleStandTime                     | min              | time          | cumulative | no  | -          | apple_stand_time                                  | -
        quantity | basal_energy_burned                    | HKQuantityTypeIdentifierBasalEnergyBurned                  | kcal             | energy        | cumulative | no  | -          | basal_energy_burned                               | -
        quantity | cross_country_skiing_speed             | HKQuantityTypeIdentifierCrossCountrySkiingSpeed            | m/s              | speed         | discrete   | no  | -          | -                                                 | -
        quantity | cycling_cadence                        | HKQuantityTypeIdentifierCyclingCadence                     | count/min        | frequency     | discrete   | no  | -          | cycling_cadence                                   | -
        quantity | cycling_functional_threshold_power     | HKQuantityTypeIdentifierCyclingFunctionalThresholdPower    | W                | power         | discrete   | no  | -          | cycling_functional_threshold_power                | -
        quantity | cycling_power                          | HKQuantityTypeIdentifierCyclingPower                       | W                | power         | discrete   | no  | -          | cycling_power                                     | -
        quantity | cycling_speed                          | HKQuantityTypeIdentifierCyclingSpeed                       | m/s              | speed         | discrete   | no  | -          | cycling_speed                                     | -
        quantity | distance_cross_country_skiing          | HKQuantityTypeIdentifierDistanceCrossCountrySkiing         | m                | length        | cumulative | no  | -          | -                                                 | -
        quantity | distance_cycling                       | HKQuantityTypeIdentifierDistanceCycling                    | m                | length        | cumulative | no  | -          | cycling_distance                                  | -
        quantity | distance_downhill_snow_sports          | HKQuantityTypeIdentifierDistanceDownhillSnowSports         | m                | length        | cumulative | no  | -          | downhill_snow_sports                              | -
        quantity | distance_paddle_sports                 | HKQuantityTypeIdentifierDistancePaddleSports               | m                | length        | cumulative | no  | -          | -                                                 | -
        quantity | distance_rowing                        | HKQuantityTypeIdentifierDistanceRowing                     | m                | length        | cumulative | no  | -          | -                                                 | -
        quantity | distance_skating_sports                | HKQuantityTypeIdentifierDistanceSkatingSports              | m                | length        | cumulative | no  | -          | -                                                 | -
        quantity | distance_swimming                      | HKQuantityTypeIdentifierDistanceSwimming                   | m                | length        | cumulative | no  | -          | swimming_distance                                 | -
        quantity | distance_walking_running               | HKQuantityTypeIdentifierDistanceWalkingRunning             | m                | length        | cumulative | no  | -          | walking_running_distance                          | -
        quantity | distance_wheelchair                    | HKQuantityTypeIdentifierDistanceWheelchair                 | m                | length        | cumulative | no  | -          | wheelchair_distance                               | -
        quantity | estimated_workout_effort_score         | HKQuantityTypeIdentifierEstimatedWorkoutEffortScore        | appleEffortScore | other         | discrete   | no  | -          | -                                                 | -
        quantity | flights_climbed                        | HKQuantityTypeIdentifierFlightsClimbed                     | count            | count         | cumulative | no  | -          | flights_climbed                                   | -
        quantity | nike_fuel                              | HKQuantityTypeIdentifierNikeFuel                           | count            | count         | cumulative | no  | -          | -                                                 | -
        quantity | paddle_sports_speed                    | HKQuantityTypeIdentifierPaddleSportsSpeed                  | m/s              | speed         | discrete   | no  | -          | -                                                 | -
        quantity | physical_effort                        | HKQuantityTypeIdentifierPhysicalEffort                     | kcal/(kg*hr)     | effort        | discrete   | no  | -          | physical_effort                                   | -
        quantity | push_count                             | HKQuantityTypeIdentifierPushCount                          | count            | count         | cumulative | no  | -          | wheelchair_push_count                             | -
        quantity | rowing_speed                           | HKQuantityTypeIdentifierRowingSpeed                        | m/s              | speed         | discrete   | no  | -          | -                                                 | -
        quantity | running_power                          | HKQuantityTypeIdentifierRunningPower                       | W                | power         | discrete   | no  | -          | running_power                                     | -
        quantity | running_speed                          | HKQuantityTypeIdentifierRunningSpeed                       | m/s              | speed         | discrete   | no  | -          | running_speed                                     | -
        quantity | steps                                  | HKQuantityTypeIdentifierStepCount                          | count            | count         | cumulative | no  | -          | step_count                                        | -
        quantity | swimming_stroke_count                  | HKQuantityTypeIdentifierSwimmingStrokeCount                | count            | count         | cumulative | no  | -          | swim_stroke_count                                 | -
        quantity | underwater_depth                       | HKQuantityTypeIdentifierUnderwaterDepth                    | m                | length        | discrete   | no  | -          | under_water_depth                                 | -
        quantity | workout_effort_score                   | HKQuantityTypeIdentifierWorkoutEffortScore                 | appleEffortScore | other         | discrete   | no  | -          | -                                                 | -

        # ---- quantity types: hearing ----------------------------------------------------------------------------------------
        quantity | environmental_audio_exposure           | HKQuantityTypeIdentifierEnvironmentalAudioExposure         | dBASPL           | sound         | discrete   | no  | -          | environmental_audio_exposure, environmental_audio | -
        quantity | environmental_sound_reduction          | HKQuantityTypeIdentifierEnvironmentalSoundReduction        | dBASPL           | sound         | discrete   | no  | -          | -                                                 | -
        quantity | headphone_audio_exposure               | HKQuantityTypeIdentifierHeadphoneAudioExposure             | dBASPL           | sound         | discrete   | no  | -          | headphone_audio_exposure, headphone_audio         | -

        # ---- quantity types: heart ------------------------------------------------------------------------------------------
        quantity | atrial_fibrillation_burden             | HKQuantityTypeIdentifierAtrialFibrillationBurden           | %                | fraction      | discrete   | no  | -          | atrial_fibrillation_burden                        | -
        quantity | heart_rate                             | HKQuantityTypeIdentifierHeartRate                          | count/min        | frequency     | discrete   | yes | 20...300   | heart_rate                                        | -
        quantity | heart_rate_recovery_one_minute         | HKQuantityTypeIdentifierHeartRateRecoveryOneMinute         | count/min        | frequency     | discrete   | no  | -          | cardio_recovery                                   | -
        quantity | heart_rate_variability_sdnn            | HKQuantityTypeIdentifierHeartRateVariabilitySDNN           | ms               | time          | discrete   | no  | -          | heart_rate_variability                            | -
        quantity | peripheral_perfusion_index             | HKQuantityTypeIdentifierPeripheralPerfusionIndex           | %                | fraction      | discrete   | no  | -          | peripheral_perfusion_index                        | -
        quantity | resting_heart_rate                     | HKQuantityTypeIdentifierRestingHeartRate                   | count/min        | frequency     | discrete   | no  | -          | resting_heart_rate                                | -
        quantity | vo2_max                                | HKQuantityTypeIdentifierVO2Max                             | ml/(kg*min)      | vo2           | discrete   | no  | -          | vo2_max                                           | -
        quantity | walking_heart_rate_average             | HKQuantityTypeIdentifierWalkingHeartRateAverage            | count/min        | frequency     | discrete   | no  | -          | walking_heart_rate_average, walking_heart_rate    | -

        # ---- quantity types: mobility ---------------------------------------------------------------------------------------
        quantity | apple_walking_steadiness               | HKQuantityTypeIdentifierAppleWalkingSteadiness             | %                | fraction      | discrete   | no  | -          | -                                                 | -
        quantity | running_ground_contact_time            | HKQuantityTypeIdentifierRunningGroundContactTime           | ms               | time          | discrete   | no  | -          | running_ground_contact_time                       | -
        quantity | running_stride_length                  | HKQuantityTypeIdentifierRunningStrideLength                | m                | length        | discrete   | no  | -          | running_stride_length                             | -
        quantity | running_vertical_oscillation           | HKQuantityTypeIdentifierRunningVerticalOscillation         | cm               | length        | discrete   | no  | -          | running_vertical_oscillation                      | -
        quantity | six_minute_walk_test_distance          | HKQuantityTypeIdentifierSixMinuteWalkTestDistance          | m                | length        | discrete   | no  | -          | six_minute_walking_test_distance                  | -
        quantity | stair_ascent_speed                     | HKQuantityTypeIdentifierStairAscentSpeed                   | m/s              | speed         | discrete   | no  | -          | stair_speed_up                                    | -
        quantity | stair_descent_speed                    | HKQuantityTypeIdentifierStairDescentSpeed                  | m/s              | speed         | discrete   | no  | -          | stair_speed_down                                  | -
        quantity | walking_asymmetry_percentage           | HKQuantityTypeIdentifierWalkingAsymmetryPercentage         | %                | fraction      | discrete   | no  | -          | walking_asymmetry_percentage                      | -
        quantity | walking_double_support_percentage      | HKQuantityTypeIdentifierWalkingDoubleSupportPercentage     | %                | fraction      | discrete   | no  | -          | walking_double_support_percentage                 | -
        quantity | walking_speed                          | HKQuantityTypeIdentifierWalkingSpeed                       | m/s              | speed         | discrete   | no  | -          | walking_speed                                     | -
        quantity | walking_step_length                    | HKQuantityTypeIdentifierWalkingStepLength                  | m                | length        | discrete   | no  | -          | walking_step_length                               | -

        # ---- quantity types: nutrition (bounds are per entry, in grams unless the unit says otherwise) ----------------------
        quantity | dietary_biotin                         | HKQuantityTypeIdentifierDietaryBiotin                      | g                | mass          | cumulative | yes | 0...0.1    | biotin                                            | -
        quantity | dietary_caffeine                       | HKQuantityTypeIdentifierDietaryCaffeine                    | g                | mass          | cumulative | yes | 0...2      | caffeine                                          | -
        quantity | dietary_calcium                        | HKQuantityTypeIdentifierDietaryCalcium                     | g                | mass          | cumulative | yes | 0...50     | calcium                                           | -
        quantity | dietary_carbohydrates                  | HKQuantityTypeIdentifierDietaryCarbohydrates               | g                | mass          | cumulative | yes | 0...2000   | carbohydrates                                     | -
        quantity | dietary_chloride                       | HKQuantityTypeIdentifierDietaryChloride                    | g                | mass          | cumulative | yes | 0...50     | chloride                                          | -
        quantity | dietary_cholesterol                    | HKQuantityTypeIdentifierDietaryCholesterol                 | g                | mass          | cumulative | yes | 0...10     | cholesterol                                       | -
        quantity | dietary_chromium                       | HKQuantityTypeIdentifierDietaryChromium                    | g                | mass          | cumulative | yes | 0...0.1    | chromium                                          | -
        quantity | dietary_copper                         | HKQuantityTypeIdentifierDietaryCopper                      | g                | mass          | cumulative | yes | 0...1      | copper                                            | -
        quantity | dietary_energy_consumed                | HKQuantityTypeIdentifierDietaryEnergyConsumed              | kcal             | energy        | cumulative | yes | 0...20000  | dietary_energy                                    | -
        quantity | dietary_fat_monounsaturated            | HKQuantityTypeIdentifierDietaryFatMonounsaturated          | g                | mass          | cumulative | yes | 0...1000   | monounsaturated_fat, monosaturated_fat            | -
        quantity | dietary_fat_polyunsaturated            | HKQuantityTypeIdentifierDietaryFatPolyunsaturated          | g                | mass          | cumulative | yes | 0...1000   | polyunsaturated_fat                               | -
        quantity | dietary_fat_saturated                  | HKQuantityTypeIdentifierDietaryFatSaturated                | g                | mass          | cumulative | yes | 0...1000   | saturated_fat                                     | -
        quantity | dietary_fat_total                      | HKQuantityTypeIdentifierDietaryFatTotal                    | g                | mass          | cumulative | yes | 0...2000   | total_fat                                         | -
        quantity | dietary_fiber                          | HKQuantityTypeIdentifierDietaryFiber                       | g                | mass          | cumulative | yes | 0...500    | fiber                                             | -
        quantity | dietary_folate                         | HKQuantityTypeIdentifierDietaryFolate                      | g                | mass          | cumulative | yes | 0...0.1    | folate                                            | -
        quantity | dietary_iodine                         | HKQuantityTypeIdentifierDietaryIodine                      | g                | mass          | cumulative | yes | 0...0.1    | iodine                                            | -
        quantity | dietary_iron                           | HKQuantityTypeIdentifierDietaryIron                        | g                | mass          | cumulative | yes | 0...10     | iron                                              | -
        quantity | dietary_magnesium                      | HKQuantityTypeIdentifierDietaryMagnesium                   | g                | mass          | cumulative | yes | 0...50     | magnesium                                         | -
        quantity | dietary_manganese                      | HKQuantityTypeIdentifierDietaryManganese                   | g                | mass          | cumulative | yes | 0...10     | manganese                                         | -
        quantity | dietary_molybdenum                     | HKQuantityTypeIdentifierDietaryMolybdenum                  | g                | mass          | cumulative | yes | 0...0.1    | molybdenum                                        | -
        quantity | dietary_niacin                         | HKQuantityTypeIdentifierDietaryNiacin                      | g                | mass          | cumulative | yes | 0...10     | niacin                                            | -
        quantity | dietary_pantothenic_acid               | HKQuantityTypeIdentifierDietaryPantothenicAcid             | g                | mass          | cumulative | yes | 0...10     | pantothenic_acid                                  | -
        quantity | dietary_phosphorus                     | HKQuantityTypeIdentifierDietaryPhosphorus                  | g                | mass          | cumulative | yes | 0...50     | -                                                 | -
        quantity | dietary_potassium                      | HKQuantityTypeIdentifierDietaryPotassium                   | g                | mass          | cumulative | yes | 0...50     | potassium                                         | -
        quantity | dietary_protein                        | HKQuantityTypeIdentifierDietaryProtein                     | g                | mass          | cumulative | yes | 0...2000   | protein                                           | -
        quantity | dietary_riboflavin                     | HKQuantityTypeIdentifierDietaryRiboflavin                  | g                | mass          | cumulative | yes | 0...10     | riboflavin                                        | -
        quantity | dietary_selenium                       | HKQuantityTypeIdentifierDietarySelenium                    | g                | mass          | cumulative | yes | 0...0.1    | selenium                                          | -
        quantity | dietary_sodium                         | HKQuantityTypeIdentifierDietarySodium                      | g                | mass          | cumulative | yes | 0...50     | sodium                                            | -
        quantity | dietary_sugar                          | HKQuantityTypeIdentifierDietarySugar                       | g                | mass          | cumulative | yes | 0...2000   | dietary_sugar                                     | -
        quantity | dietary_thiamin                        | HKQuantityTypeIdentifierDietaryThiamin                     | g                | mass          | cumulative | yes | 0...10     | thiamin                                           | -
        quantity | dietary_vitamin_a                      | HKQuantityTypeIdentifierDietaryVitaminA                    | g                | mass          | cumulative | yes | 0...0.1    | vitamin_a                                         | -
        quantity | dietary_vitamin_b12                    | HKQuantityTypeIdentifierDietaryVitaminB12                  | g                | mass          | cumulative | yes | 0...0.1    | vitamin_b12                                       | -
        quantity | dietary_vitamin_b6                     | HKQuantityTypeIdentifierDietaryVitaminB6                   | g                | mass          | cumulative | yes | 0...10     | vitamin_b6                                        | -
        quantity | dietary_vitamin_c                      | HKQuantityTypeIdentifierDietaryVitaminC                    | g                | mass          | cumulative | yes | 0...50     | vitamin_c                                         | -
        quantity | dietary_vitamin_d                      | HKQuantityTypeIdentifierDietaryVitaminD                    | g                | mass          | cumulative | yes | 0...0.1    | vitamin_d                                         | -
        quantity | dietary_vitamin_e                      | HKQuantityTypeIdentifierDietaryVitaminE                    | g                | mass          | cumulative | yes | 0...10     | vitamin_e                                         | -
        quantity | dietary_vitamin_k                      | HKQuantityTypeIdentifierDietaryVitaminK                    | g                | mass          | cumulative | yes | 0...0.1    | vitamin_k                                         | -
        quantity | dietary_water                          | HKQuantityTypeIdentifierDietaryWater                       | mL               | volume        | cumulative | yes | 0...10000  | dietary_water                                     | -
        quantity | dietary_zinc                           | HKQuantityTypeIdentifierDietaryZinc                        | g                | mass          | cumulative | yes | 0...10     | zinc                                              | -

        # ---- quantity types: other ------------------------------------------------------------------------------------------
        quantity | blood_alcohol_content                  | HKQuantityTypeIdentifierBloodAlcoholContent                | %                | fraction      | discrete   | yes | 0...0.01   | blood_alcohol_content                             | -
        quantity | blood_pressure_diastolic               | HKQuantityTypeIdentifierBloodPressureDiastolic             | mmHg             | pressure      | discrete   | yes | 20...200   | -                                                 | -
        quantity | blood_pressure_systolic                | HKQuantityTypeIdentifierBloodPressureSystolic              | mmHg             | pressure      | discrete   | yes | 40...300   | -                                                 | -
        quantity | insulin_delivery                       | HKQuantityTypeIdentifierInsulinDelivery                    | IU               | other         | cumulative | yes | 0...300    | insulin_delivery                                  | -
        quantity | number_of_alcoholic_beverages          | HKQuantityTypeIdentifierNumberOfAlcoholicBeverages         | count            | count         | cumulative | yes | 0...100    | number_of_alcoholic_beverages                     | -
        quantity | number_of_times_fallen                 | HKQuantityTypeIdentifierNumberOfTimesFallen                | count            | count         | cumulative | no  | -          | number_of_times_fallen, number_of_time_fallen     | -
        quantity | time_in_daylight                       | HKQuantityTypeIdentifierTimeInDaylight                     | min              | time          | cumulative | no  | -          | time_in_daylight                                  | -
        quantity | uv_exposure                            | HKQuantityTypeIdentifierUVExposure                         | count            | count         | discrete   | no  | -          | uv_exposure                                       | -
        quantity | water_temperature                      | HKQuantityTypeIdentifierWaterTemperature                   | degC             | temperature   | discrete   | no  | -          | under_water_temperature                           | -

        # ---- quantity types: reproductive health, respiratory, vital signs ---------------------------------------------------
        quantity | basal_body_temperature                 | HKQuantityTypeIdentifierBasalBodyTemperature               | degC             | temperature   | discrete   | yes | 30...45    | basal_body_temperature                            | -
        quantity | apple_sleeping_breathing_disturbances  | HKQuantityTypeIdentifierAppleSleepingBreathingDisturbances | count            | count         | discrete   | no  | -          | breathing_disturbances                            | -
        quantity | forced_expiratory_volume1              | HKQuantityTypeIdentifierForcedExpiratoryVolume1            | L                | volume        | discrete   | yes | 0...10     | forced_expiratory_volume                          | -
        quantity | forced_vital_capacity                  | HKQuantityTypeIdentifierForcedVitalCapacity                | L                | volume        | discrete   | yes | 0...10     | forced_vital_capacity                             | -
        quantity | inhaler_usage                          | HKQuantityTypeIdentifierInhalerUsage                       | count            | count         | cumulative | yes | 0...100    | inhaler_usage                                     | -
        quantity | oxygen_saturation                      | HKQuantityTypeIdentifierOxygenSaturation                   | %                | fraction      | discrete   | yes | 0.5...1    | blood_oxygen_saturation                           | -
        quantity | peak_expiratory_flow_rate              | HKQuantityTypeIdentifierPeakExpiratoryFlowRate             | L/min            | other         | discrete   | yes | 0...1000   | peak_expiratory_flow_rate                         | -
        quantity | respiratory_rate                       | HKQuantityTypeIdentifierRespiratoryRate                    | count/min        | frequency     | discrete   | yes | 1...100    | respiratory_rate                                  | -
        quantity | blood_glucose                          | HKQuantityTypeIdentifierBloodGlucose                       | mg/dL            | concentration | discrete   | yes | 10...1500  | blood_glucose                                     | -
        quantity | body_temperature                       | HKQuantityTypeIdentifierBodyTemperature                    | degC             | temperature   | discrete   | yes | 25...45    | body_temperature                                  | -

        # ---- category types ---------------------------------------------------------------------------------------------------
        category | apple_stand_hour                       | HKCategoryTypeIdentifierAppleStandHour                     | -                | -             | discrete   | no  | -          | apple_stand_hour                                  | apple_stand_hour
        category | environmental_audio_exposure_event     | HKCategoryTypeIdentifierEnvironmentalAudioExposureEvent    | -                | -             | discrete   | no  | -          | -                                                 | environmental_audio_event
        category | headphone_audio_exposure_event         | HKCategoryTypeIdentifierHeadphoneAudioExposureEvent        | -                | -             | discrete   | no  | -          | -                                                 | headphone_audio_event
        category | high_heart_rate_event                  | HKCategoryTypeIdentifierHighHeartRateEvent                 | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | irregular_heart_rhythm_event           | HKCategoryTypeIdentifierIrregularHeartRhythmEvent          | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | low_cardio_fitness_event               | HKCategoryTypeIdentifierLowCardioFitnessEvent              | -                | -             | discrete   | no  | -          | -                                                 | low_cardio_fitness
        category | low_heart_rate_event                   | HKCategoryTypeIdentifierLowHeartRateEvent                  | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | mindful_session                        | HKCategoryTypeIdentifierMindfulSession                     | -                | -             | discrete   | yes | -          | mindful_minutes                                   | not_applicable
        category | apple_walking_steadiness_event         | HKCategoryTypeIdentifierAppleWalkingSteadinessEvent        | -                | -             | discrete   | no  | -          | -                                                 | walking_steadiness_event
        category | handwashing_event                      | HKCategoryTypeIdentifierHandwashingEvent                   | -                | -             | discrete   | no  | -          | handwashing                                       | not_applicable
        category | toothbrushing_event                    | HKCategoryTypeIdentifierToothbrushingEvent                 | -                | -             | discrete   | no  | -          | toothbrushing                                     | not_applicable
        category | sleep_apnea_event                      | HKCategoryTypeIdentifierSleepApneaEvent                    | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | sleep_analysis                         | HKCategoryTypeIdentifierSleepAnalysis                      | -                | -             | discrete   | yes | -          | sleep_analysis                                    | sleep_analysis

        # ---- category types: reproductive health -------------------------------------------------------------------------------
        category | bleeding_after_pregnancy               | HKCategoryTypeIdentifierBleedingAfterPregnancy             | -                | -             | discrete   | yes | -          | -                                                 | vaginal_bleeding
        category | bleeding_during_pregnancy              | HKCategoryTypeIdentifierBleedingDuringPregnancy            | -                | -             | discrete   | yes | -          | -                                                 | vaginal_bleeding
        category | cervical_mucus_quality                 | HKCategoryTypeIdentifierCervicalMucusQuality               | -                | -             | discrete   | yes | -          | -                                                 | cervical_mucus
        category | contraceptive                          | HKCategoryTypeIdentifierContraceptive                      | -                | -             | discrete   | yes | -          | -                                                 | contraceptive
        category | infrequent_menstrual_cycles            | HKCategoryTypeIdentifierInfrequentMenstrualCycles          | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | intermenstrual_bleeding                | HKCategoryTypeIdentifierIntermenstrualBleeding             | -                | -             | discrete   | yes | -          | -                                                 | not_applicable
        category | irregular_menstrual_cycles             | HKCategoryTypeIdentifierIrregularMenstrualCycles           | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | lactation                              | HKCategoryTypeIdentifierLactation                          | -                | -             | discrete   | yes | -          | -                                                 | not_applicable
        category | menstrual_flow                         | HKCategoryTypeIdentifierMenstrualFlow                      | -                | -             | discrete   | yes | -          | -                                                 | vaginal_bleeding
        category | ovulation_test_result                  | HKCategoryTypeIdentifierOvulationTestResult                | -                | -             | discrete   | yes | -          | -                                                 | ovulation_test
        category | persistent_intermenstrual_bleeding     | HKCategoryTypeIdentifierPersistentIntermenstrualBleeding   | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | pregnancy                              | HKCategoryTypeIdentifierPregnancy                          | -                | -             | discrete   | yes | -          | -                                                 | not_applicable
        category | pregnancy_test_result                  | HKCategoryTypeIdentifierPregnancyTestResult                | -                | -             | discrete   | yes | -          | -                                                 | test_result
        category | progesterone_test_result               | HKCategoryTypeIdentifierProgesteroneTestResult             | -                | -             | discrete   | yes | -          | -                                                 | test_result
        category | prolonged_menstrual_periods            | HKCategoryTypeIdentifierProlongedMenstrualPeriods          | -                | -             | discrete   | no  | -          | -                                                 | not_applicable
        category | sexual_activity                        | HKCategoryTypeIdentifierSexualActivity                     | -                | -             | discrete   | yes | -          | sexual_activity                                   | not_applicable

        # ---- category types: symptoms (HKCategoryValueSeverity unless noted) --------------------------------------------------
        category | abdominal_cramps                       | HKCategoryTypeIdentifierAbdominalCramps                    | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | acne                                   | HKCategoryTypeIdentifierAcne                               | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | appetite_changes                       | HKCategoryTypeIdentifierAppetiteChanges                    | -                | -             | discrete   | yes | -          | -                                                 | appetite_changes
        category | bladder_incontinence                   | HKCategoryTypeIdentifierBladderIncontinence                | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | bloating                               | HKCategoryTypeIdentifierBloating                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | breast_pain                            | HKCategoryTypeIdentifierBreastPain                         | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | chest_tightness_or_pain                | HKCategoryTypeIdentifierChestTightnessOrPain               | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | chills                                 | HKCategoryTypeIdentifierChills                             | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | constipation                           | HKCategoryTypeIdentifierConstipation                       | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | coughing                               | HKCategoryTypeIdentifierCoughing                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | diarrhea                               | HKCategoryTypeIdentifierDiarrhea                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | dizziness                              | HKCategoryTypeIdentifierDizziness                          | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | dry_skin                               | HKCategoryTypeIdentifierDrySkin                            | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | fainting                               | HKCategoryTypeIdentifierFainting                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | fatigue                                | HKCategoryTypeIdentifierFatigue                            | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | fever                                  | HKCategoryTypeIdentifierFever                              | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | generalized_body_ache                  | HKCategoryTypeIdentifierGeneralizedBodyAche                | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | hair_loss                              | HKCategoryTypeIdentifierHairLoss                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | headache                               | HKCategoryTypeIdentifierHeadache                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | heartburn                              | HKCategoryTypeIdentifierHeartburn                          | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | hot_flashes                            | HKCategoryTypeIdentifierHotFlashes                         | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | loss_of_smell                          | HKCategoryTypeIdentifierLossOfSmell                        | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | loss_of_taste                          | HKCategoryTypeIdentifierLossOfTaste                        | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | lower_back_pain                        | HKCategoryTypeIdentifierLowerBackPain                      | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | memory_lapse                           | HKCategoryTypeIdentifierMemoryLapse                        | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | mood_changes                           | HKCategoryTypeIdentifierMoodChanges                        | -                | -             | discrete   | yes | -          | -                                                 | presence
        category | nausea                                 | HKCategoryTypeIdentifierNausea                             | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | night_sweats                           | HKCategoryTypeIdentifierNightSweats                        | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | pelvic_pain                            | HKCategoryTypeIdentifierPelvicPain                         | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | rapid_pounding_or_fluttering_heartbeat | HKCategoryTypeIdentifierRapidPoundingOrFlutteringHeartbeat | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | runny_nose                             | HKCategoryTypeIdentifierRunnyNose                          | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | shortness_of_breath                    | HKCategoryTypeIdentifierShortnessOfBreath                  | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | sinus_congestion                       | HKCategoryTypeIdentifierSinusCongestion                    | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | skipped_heartbeat                      | HKCategoryTypeIdentifierSkippedHeartbeat                   | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | sleep_changes                          | HKCategoryTypeIdentifierSleepChanges                       | -                | -             | discrete   | yes | -          | -                                                 | presence
        category | sore_throat                            | HKCategoryTypeIdentifierSoreThroat                         | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | vaginal_dryness                        | HKCategoryTypeIdentifierVaginalDryness                     | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | vomiting                               | HKCategoryTypeIdentifierVomiting                           | -                | -             | discrete   | yes | -          | -                                                 | severity
        category | wheezing                               | HKCategoryTypeIdentifierWheezing                           | -                | -             | discrete   | yes | -          | -                                                 | severity

        # ---- workout activities (HKWorkoutActivityType raw values; HAE name = the HealthKit case name de-camel-cased) -----------
        workout | 1    | american_football                | American Football
        workout | 2    | archery                          | Archery
        workout | 3    | australian_football              | Australian Football
        workout | 4    | badminton                        | Badminton
        workout | 5    | baseball                         | Baseball
        workout | 6    | basketball                       | Basketball
        workout | 7    | bowling                          | Bowling
        workout | 8    | boxing                           | Boxing
        workout | 9    | climbing                         | Climbing
        workout | 10   | cricket                          | Cricket
        workout | 11   | cross_training                   | Cross Training
        workout | 12   | curling                          | Curling
        workout | 13   | cycling                          | Cycling
        workout | 14   | dance                            | Dance
        workout | 15   | dance_inspired_training          | Dance Inspired Training
        workout | 16   | elliptical                       | Elliptical
        workout | 17   | equestrian_sports                | Equestrian Sports
        workout | 18   | fencing                          | Fencing
        workout | 19   | fishing                          | Fishing
        workout | 20   | functional_strength_training     | Functional Strength Training
        workout | 21   | golf                             | Golf
        workout | 22   | gymnastics                       | Gymnastics
        workout | 23   | handball                         | Handball
        workout | 24   | hiking                           | Hiking
        workout | 25   | hockey                           | Hockey
        workout | 26   | hunting                          | Hunting
        workout | 27   | lacrosse                         | Lacrosse
        workout | 28   | martial_arts                     | Martial Arts
        workout | 29   | mind_and_body                    | Mind And Body
        workout | 30   | mixed_metabolic_cardio_training  | Mixed Metabolic Cardio Training
        workout | 31   | paddle_sports                    | Paddle Sports
        workout | 32   | play                             | Play
        workout | 33   | preparation_and_recovery         | Preparation And Recovery
        workout | 34   | racquetball                      | Racquetball
        workout | 35   | rowing                           | Rowing
        workout | 36   | rugby                            | Rugby
        workout | 37   | running                          | Running
        workout | 38   | sailing                          | Sailing
        workout | 39   | skating_sports                   | Skating Sports
        workout | 40   | snow_sports                      | Snow Sports
        workout | 41   | soccer                           | Soccer
        workout | 42   | softball                         | Softball
        workout | 43   | squash                           | Squash
        workout | 44   | stair_climbing                   | Stair Climbing
        workout | 45   | surfing_sports                   | Surfing Sports
        workout | 46   | swimming                         | Swimming
        workout | 47   | table_tennis                     | Table Tennis
        workout | 48   | tennis                           | Tennis
        workout | 49   | track_and_field                  | Track And Field
        workout | 50   | traditional_strength_training    | Traditional Strength Training
        workout | 51   | volleyball                       | Volleyball
        workout | 52   | walking                          | Walking
        workout | 53   | water_fitness                    | Water Fitness
        workout | 54   | water_polo                       | Water Polo
        workout | 55   | water_sports                     | Water Sports
        workout | 56   | wrestling                        | Wrestling
        workout | 57   | yoga                             | Yoga
        workout | 58   | barre                            | Barre
        workout | 59   | core_training                    | Core Training
        workout | 60   | cross_country_skiing             | Cross Country Skiing
        workout | 61   | downhill_skiing                  | Downhill Skiing
        workout | 62   | flexibility                      | Flexibility
        workout | 63   | high_intensity_interval_training | High Intensity Interval Training
        workout | 64   | jump_rope                        | Jump Rope
        workout | 65   | kickboxing                       | Kickboxing
        workout | 66   | pilates                          | Pilates
        workout | 67   | snowboarding                     | Snowboarding
        workout | 68   | stairs                           | Stairs
        workout | 69   | step_training                    | Step Training
        workout | 70   | wheelchair_walk_pace             | Wheelchair Walk Pace
        workout | 71   | wheelchair_run_pace              | Wheelchair Run Pace
        workout | 72   | tai_chi                          | Tai Chi
        workout | 73   | mixed_cardio                     | Mixed Cardio
        workout | 74   | hand_cycling                     | Hand Cycling
        workout | 75   | disc_sports                      | Disc Sports
        workout | 76   | fitness_gaming                   | Fitness Gaming
        workout | 77   | cardio_dance                     | Cardio Dance
        workout | 78   | social_dance                     | Social Dance
        workout | 79   | pickleball                       | Pickleball
        workout | 80   | cooldown                         | Cooldown
        workout | 82   | swim_bike_run                    | Swim Bike Run
        workout | 83   | transition                       | Transition
        workout | 84   | underwater_diving                | Underwater Diving
        workout | 3000 | other                            | Other

        # ---- characteristics (HKCharacteristicTypeIdentifier*) ----------------------------------------------------------------
        characteristic | activity_move_mode    | activity_move_mode
        characteristic | biological_sex        | biological_sex
        characteristic | blood_type            | blood_type
        characteristic | date_of_birth         | -
        characteristic | fitzpatrick_skin_type | fitzpatrick_skin_type
        characteristic | wheelchair_use        | wheelchair_use

        """
}
